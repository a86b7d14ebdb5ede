package invoice

import (
	"cmp"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/evmpay/evmpay/hdwallet"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/api"
)

// Store is what the invoice service needs from the shared database.
// store.Store satisfies it.
type Store interface {
	store.MerchantStore
	store.InvoiceStore
	store.IdempotencyStore
	// The merchant's logo and accent colour for the checkout page.
	store.BrandingStore
	DepositAddresses
	InTx(ctx context.Context, fn func(tx store.Tx) error) error
	// The public read counts the confirmations of an invoice's payments.
	ListPaymentsByInvoice(ctx context.Context, invoiceID int64) ([]store.Payment, error)
	// The merchant's reads of fiat invoices list their payments.
	ListPaymentsByInvoices(ctx context.Context, ids []int64) ([]store.Payment, error)
	LatestBlock(ctx context.Context) (store.Block, error)
	// Refunds, payouts, scoped keys and the ledger (refunds.go).
	store.APIKeyStore
	store.OutboundStore
	store.PayoutPolicyStore
	GetPayoutWallet(ctx context.Context, merchantID int64) (store.ServiceWallet, error)
	GetServiceWallet(ctx context.Context, addr common.Address) (store.ServiceWallet, error)
	ListLedgerEntries(ctx context.Context, f store.LedgerFilter) ([]store.LedgerEntry, error)
	InsertEvent(ctx context.Context, e *store.Event) error
	// A merchant-paid outbound's named transaction is checked against
	// the index (store.TransfersOf).
	store.TransferReader
}

// MaxAmountWei is the largest invoice amount accepted by default: 10^27 wei,
// the native token's supply cap (10^9 units of 10^18 subunits).
var MaxAmountWei = store.MustParseAmount("1000000000000000000000000000")

// MaxTokenAmount caps a token invoice's amount when Config.TokenMaxAmounts
// has no entry for its token: 10^36 base units (10^18 whole tokens at 18
// decimals), far above any real token's supply and far below 2^256.
var MaxTokenAmount = store.MustParseAmount("1000000000000000000000000000000000000")

// Config tunes a Service.
type Config struct {
	// BaseURL is the absolute URL the API is reached at
	// ("https://pay.example.com"); qr_png_url and qr_svg_url start with it.
	// Defaults to "" (URLs relative to the host, "/v1/invoices/1/qr.png").
	BaseURL string
	// DefaultExpiry is an invoice's lifetime when the request names none.
	// Defaults to 15 minutes.
	DefaultExpiry time.Duration
	// MinExpiry and MaxExpiry bound expires_in_seconds. Default to 1 minute
	// and 7 days.
	MinExpiry time.Duration
	MaxExpiry time.Duration
	// Assets are the assets invoices may be for: ERC-20 tokens (symbol,
	// contract address, decimals — the host reads decimals() from the
	// contract), and optionally the native coin (Address nil) to name its
	// symbol. A request names one by symbol or token address ("asset");
	// without one an invoice is for the native coin. Defaults to nil: the
	// native coin only, symbol DefaultNativeSymbol.
	Assets []store.Asset
	// Pricer quotes invoices priced in a fiat currency (a request's
	// "price"; docs/pricing.md) in the accepted assets, which default to
	// every asset of Assets that it prices. *pricing.Pricer satisfies it.
	// A refund asked for in fiat "at the current rate" is converted with
	// it too. Defaults to nil: fiat pricing off (a request with a price
	// gets 400 unsupported_currency, such a refund 422 fiat_unavailable).
	Pricer Pricer
	// MaxAmount caps amount_wei. Defaults to MaxAmountWei (10^27).
	MaxAmount *store.Amount
	// TokenMaxAmounts caps a token invoice's amount, per token contract,
	// in base units: an invoice for more of a token than exists can never
	// be paid (payd passes each token's totalSupply() read at start). A
	// token without an entry is capped at MaxTokenAmount. Defaults to
	// none.
	TokenMaxAmounts map[common.Address]store.Amount
	// MaxBodyBytes caps request bodies; larger ones get 413. Defaults to
	// 64 KiB.
	MaxBodyBytes int64
	// MaxMetadataBytes caps the metadata object (compact JSON). Defaults to
	// 4 KiB.
	MaxMetadataBytes int
	// IdempotencyTTL is how long an Idempotency-Key and its response are
	// kept; at least 24 h. Defaults to 24 h.
	IdempotencyTTL time.Duration
	// IdempotencyLease is how long an unfinished request holds its key
	// before a retry may take it over (the request's process died).
	// Defaults to 30 s.
	IdempotencyLease time.Duration
	// CreateBatchSize caps how many invoice creations of this process are
	// committed in one transaction (group commit; see docs/invoice.md). A
	// batch is whatever is queued when the previous one commits: nothing
	// waits to fill it. 1 commits every creation alone. Defaults to 64.
	CreateBatchSize int
	// PurgeInterval is how often Run deletes expired Idempotency-Keys.
	// Defaults to 1 hour.
	PurgeInterval time.Duration
	// AdminToken is the operator's bearer token for /v1/admin/…. Defaults
	// to "", which turns the admin API off (every call gets 401).
	AdminToken string
	// CheckoutURL is the hosted checkout page's absolute URL (see package
	// invoice/checkout). Create responses carry checkout_url, this URL
	// with the lookup token as its fragment ("…/checkout#<token>"): a
	// browser never sends a fragment to a server, so the token reaches no
	// access log. Defaults to BaseURL + "/checkout".
	CheckoutURL string
	// AllowLoopbackHTTPRedirect accepts redirect_url values with http on a
	// loopback host (127.0.0.1, ::1, localhost), for development; other
	// redirect URLs must be https. Defaults to false.
	AllowLoopbackHTTPRedirect bool
	// Confirmations is the settlement threshold the public read reports
	// (confirmations n of Confirmations), and what a payment needs before
	// it may be refunded. Defaults to 12 (none under FinalityInstant and
	// FinalityTag, which refuse a count).
	Confirmations int
	// Finality is the chain's finality mode: store.FinalityDepth
	// (Confirmations), store.FinalityInstant (a payment counts once its
	// block is indexed) or store.FinalityTag (a payment counts once its
	// block is at or below the finalized block the indexer recorded,
	// store.FinalityStore). Under instant and tag the public read reports
	// confirmations and confirmations_required 0: the status (PAID,
	// then CONFIRMED) tells when a payment is final. Defaults to
	// store.FinalityDepth.
	Finality string
	// QRSize is the default side of QR PNGs in pixels (?size= overrides it
	// within 64…1024). Defaults to 256.
	QRSize int
	// OpenAPI is the OpenAPI document served at /v1/openapi.json, for a
	// host that serves more than this package and merges its own parts in
	// (payd does). Defaults to this package's document (OpenAPI()).
	OpenAPI []byte
	// Auth tunes the api_key Authenticator.
	Auth AuthConfig
	// PublicLookups bounds failed lookup-token reads per client address
	// (GET /v1/public/invoice…): a guesser gets 429, a page polling with
	// its token never does. Defaults to LookupLimit's defaults.
	PublicLookups LookupLimit
	// Merchants are the checks a merchant's webhook_url and
	// settlement_address must pass at create and update (private webhook
	// hosts, addresses the service holds, contracts). Refund and payout
	// destinations pass the same address checks. Defaults to the zero
	// MerchantRules: syntax checks only.
	Merchants MerchantRules
	// Chains are the chains besides New's on which invoices may be created
	// (a request's "chain_id"), each with its own assets and finality.
	// Defaults to none: New's chain only.
	Chains []Chain
	// ChainStopped reports why the parts that watch chain id — its
	// indexer, settlement and sweep — stopped while the process goes on
	// (a node that serves another chain, a reorg the index refused), nil
	// while they run. An invoice on a stopped chain, or accepting an asset
	// on one, is refused with chain_unavailable (503) and nothing is
	// written: its payer would pay into an address nobody watches until
	// an operator fixes the node. Defaults to nil: no chain is refused.
	ChainStopped func(id uint64) error
	// ClaimURL is the claim page's absolute URL (package invoice/checkout):
	// a refund made without a destination answers with claim_url, this URL
	// with the claim token as its fragment. Defaults to BaseURL + "/claim".
	ClaimURL string
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
	// Logger receives request failures and Run's progress. Defaults to a
	// logger that discards everything.
	Logger *slog.Logger
}

func (c *Config) fill() {
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
	c.CheckoutURL = cmp.Or(c.CheckoutURL, c.BaseURL+"/checkout")
	c.ClaimURL = cmp.Or(c.ClaimURL, c.BaseURL+"/claim")
	if store.FinalityCountsConfirmations(c.Finality) {
		c.Confirmations = cmp.Or(c.Confirmations, 12)
	}
	c.DefaultExpiry = cmp.Or(c.DefaultExpiry, 15*time.Minute)
	c.MinExpiry = cmp.Or(c.MinExpiry, time.Minute)
	c.MaxExpiry = cmp.Or(c.MaxExpiry, 7*24*time.Hour)
	if c.MaxAmount == nil {
		max := MaxAmountWei
		c.MaxAmount = &max
	}
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, 64<<10)
	c.MaxMetadataBytes = cmp.Or(c.MaxMetadataBytes, 4<<10)
	c.IdempotencyTTL = cmp.Or(c.IdempotencyTTL, 24*time.Hour)
	c.IdempotencyLease = cmp.Or(c.IdempotencyLease, 30*time.Second)
	c.CreateBatchSize = cmp.Or(c.CreateBatchSize, 64)
	c.PurgeInterval = cmp.Or(c.PurgeInterval, time.Hour)
	c.QRSize = cmp.Or(c.QRSize, 256)
	c.Auth.fill()
	c.PublicLookups.fill()
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

func (c Config) validate() error {
	if c.BaseURL != "" {
		u, err := url.Parse(c.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
			return errors.New("invoice: BaseURL must be an absolute http(s) URL without a query")
		}
	}
	if u, err := url.Parse(c.CheckoutURL); err != nil || u.RawQuery != "" || u.Fragment != "" ||
		(c.BaseURL != "" && (u.Scheme != "http" && u.Scheme != "https" || u.Host == "")) {
		return errors.New("invoice: CheckoutURL must be a URL without query or fragment (absolute http(s) when BaseURL is)")
	}
	switch {
	case c.Confirmations < 1 && store.FinalityCountsConfirmations(c.Finality):
		return errors.New("invoice: Confirmations must be positive")
	case c.MinExpiry <= 0 || c.MaxExpiry < c.MinExpiry:
		return errors.New("invoice: need 0 < MinExpiry <= MaxExpiry")
	case c.DefaultExpiry < c.MinExpiry || c.DefaultExpiry > c.MaxExpiry:
		return errors.New("invoice: DefaultExpiry must lie within [MinExpiry, MaxExpiry]")
	case c.MaxAmount.IsZero():
		return errors.New("invoice: MaxAmount must be positive")
	case c.MaxBodyBytes < 1024:
		return errors.New("invoice: MaxBodyBytes must be at least 1 KiB")
	case c.MaxMetadataBytes < 2:
		return errors.New("invoice: MaxMetadataBytes must allow an object")
	case c.IdempotencyTTL < 24*time.Hour:
		return errors.New("invoice: IdempotencyTTL must be at least 24 h")
	case c.IdempotencyLease <= 0 || c.IdempotencyLease >= c.IdempotencyTTL:
		return errors.New("invoice: IdempotencyLease must be positive and shorter than IdempotencyTTL")
	case c.CreateBatchSize < 1 || c.CreateBatchSize > maxCreateBatch:
		return fmt.Errorf("invoice: CreateBatchSize must lie within [1, %d]", maxCreateBatch)
	case c.PurgeInterval <= 0:
		return errors.New("invoice: PurgeInterval must be positive")
	case c.QRSize < minQRSize || c.QRSize > maxQRSize:
		return fmt.Errorf("invoice: QRSize must lie within [%d, %d]", minQRSize, maxQRSize)
	}
	return c.Auth.validate()
}

// addrLookahead is how many deposit addresses past the last index seen are
// derived ahead of the transactions that will take them: at least two
// batches' worth.
func addrLookahead(batch int) uint32 { return uint32(max(64, 2*batch)) }

// maxCreateBatch caps Config.CreateBatchSize.
const maxCreateBatch = 1000

const (
	minQRSize = 64
	maxQRSize = 1024
)

// Service is the invoice API: merchants and their credentials, idempotent
// invoice creation, reads, and the HTTP handlers over them. It holds only
// the public deriver: it can hand out deposit addresses but never spend.
type Service struct {
	st      Store
	creds   *Credentials
	deriver *hdwallet.Deriver
	// chains are the chains invoices are created on, New's first.
	chains []*chain
	cfg    Config
	auth   *Authenticator
	addrs  *addrCache
	// lookups counts failed lookup-token reads per client address.
	lookups *lookupLimiter
	batcher *batcher
	keys    *keyClaimer
	log     *slog.Logger
	openapi []byte
}

// New returns a Service. deriver gives deposit addresses (public key only);
// chainID is the EIP-155 chain id written into invoices and payment URIs.
func New(st Store, creds *Credentials, deriver *hdwallet.Deriver, chainID uint64, cfg Config) (*Service, error) {
	if err := store.CheckFinality(cfg.Finality, cfg.Confirmations); err != nil {
		return nil, fmt.Errorf("invoice: %w", err)
	}
	cfg.fill()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if st == nil || creds == nil || deriver == nil {
		return nil, errors.New("invoice: New needs a store, credentials and a deriver")
	}
	if chainID == 0 {
		return nil, errors.New("invoice: chain id must not be zero")
	}
	// A store that holds several chains (store.Store does) is bound to
	// each: an invoice's public read and its refunds read its chain's
	// index.
	chains, err := newChains(st, chainID, cfg)
	if err != nil {
		return nil, err
	}
	st = chains[0].st
	auth, err := NewAuthenticator(st, creds, cfg.Auth)
	if err != nil {
		return nil, err
	}
	doc, err := openAPIDocument(cfg.OpenAPI, cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	s := &Service{st: st, creds: creds, deriver: deriver, chains: chains, cfg: cfg,
		lookups: newLookupLimiter(cfg.PublicLookups),
		auth:    auth, addrs: newAddrCache(deriver, addrLookahead(cfg.CreateBatchSize)), log: cfg.Logger, openapi: doc}
	s.batcher = newBatcher(s, cfg.CreateBatchSize)
	s.keys = newKeyClaimer(st, cfg.CreateBatchSize, cfg.IdempotencyLease)
	return s, nil
}

// Authenticate returns the merchant whose api_key is the request's bearer
// token, or ErrUnauthorized. Other packages' merchant endpoints use it.
func (s *Service) Authenticate(r *http.Request) (store.Merchant, error) {
	return s.auth.Authenticate(r)
}

// Credentials returns the service's credentials (for WebhookSecret).
func (s *Service) Credentials() *Credentials { return s.creds }

// Run deletes expired Idempotency-Keys every PurgeInterval until ctx is
// cancelled. Running it is optional (keys then simply stay); with several
// replicas every one may run it.
func (s *Service) Run(ctx context.Context) error {
	t := time.NewTicker(s.cfg.PurgeInterval)
	defer t.Stop()
	for {
		if _, err := s.PurgeIdempotencyKeys(ctx); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "purge idempotency keys", slog.String("error", err.Error()))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// PurgeIdempotencyKeys deletes finished Idempotency-Keys past their TTL and
// returns how many went.
func (s *Service) PurgeIdempotencyKeys(ctx context.Context) (int64, error) {
	n, err := s.st.DeleteExpiredIdempotencyRecords(ctx, s.now())
	if err == nil && n > 0 {
		s.log.InfoContext(ctx, "purged expired idempotency keys", slog.Int64("count", n))
	}
	return n, err
}

// now is the clock at the microsecond, the precision the stores keep, so
// that a response shows exactly what later reads return.
func (s *Service) now() time.Time { return s.cfg.Now().UTC().Truncate(time.Microsecond) }

// MerchantParams describes a new merchant.
type MerchantParams struct {
	// Name is for people; optional.
	Name string
	// WebhookURL receives signed webhooks: an absolute http(s) URL, or ""
	// for none yet.
	WebhookURL string
	// SettlementAddress receives swept funds; required.
	SettlementAddress common.Address
	// Tolerance is the underpayment tolerance of fiat invoices; the zero
	// value forgives nothing.
	Tolerance store.MerchantTolerance
	// ExternalID is the host's own id of the merchant (unique; ""
	// for none): EnsureMerchant finds the merchant by it.
	ExternalID string
}

// CreatedMerchant is a new merchant and its credentials. APIKey and
// WebhookSecret are shown here once and never again.
type CreatedMerchant struct {
	Merchant      store.Merchant
	APIKey        string
	WebhookSecret string
}

// CreateMerchant creates a merchant with a fresh api_key and webhook
// secret (what POST /v1/admin/merchants does), under Config.Merchants.
func (s *Service) CreateMerchant(ctx context.Context, p MerchantParams) (CreatedMerchant, error) {
	return createMerchant(ctx, s.st, s.creds, s.cfg.Merchants, p, s.now())
}

// CreateMerchant creates a merchant without a Service, for tools that have
// the database and PAY_SECRET_KEY but no deriver (`payd merchants create`).
// rules are the same checks a Service applies (Config.Merchants).
func CreateMerchant(ctx context.Context, st Store, creds *Credentials, rules MerchantRules, p MerchantParams) (CreatedMerchant, error) {
	return createMerchant(ctx, st, creds, rules, p, time.Now().UTC().Truncate(time.Microsecond))
}

// ErrInvalidMerchant wraps a MerchantParams or MerchantUpdate validation
// failure or a MerchantRules refusal.
var ErrInvalidMerchant = errors.New("invoice: invalid merchant")

func createMerchant(ctx context.Context, st Store, creds *Credentials, rules MerchantRules, p MerchantParams, now time.Time) (CreatedMerchant, error) {
	if err := validateMerchant(p.Name, p.WebhookURL, p.SettlementAddress); err != nil {
		return CreatedMerchant{}, err
	}
	if err := p.Tolerance.Validate(); err != nil {
		return CreatedMerchant{}, &invalidMerchant{field: "underpayment_tolerance", reason: err.Error()}
	}
	if err := rules.check(ctx, st, &p.WebhookURL, &p.SettlementAddress); err != nil {
		return CreatedMerchant{}, err
	}
	key, digest, hash, prefix, err := creds.newAPIKey()
	if err != nil {
		return CreatedMerchant{}, err
	}
	secret, err := newWebhookSecret()
	if err != nil {
		return CreatedMerchant{}, err
	}
	m := store.Merchant{
		Name: p.Name, APIKeyDigest: digest, APIKeyHash: hash, APIKeyPrefix: prefix,
		WebhookURL: p.WebhookURL, SettlementAddress: p.SettlementAddress, Tolerance: p.Tolerance,
		ExternalID: p.ExternalID,
		// The secret is sealed with the merchant id as associated data, and
		// the id is known only after the insert: a placeholder until then,
		// in the same transaction.
		WebhookSecretCiphertext: []byte{0},
		CreatedAt:               now, UpdatedAt: now,
	}
	err = st.InTx(ctx, func(tx store.Tx) error {
		if err := tx.CreateMerchant(ctx, &m); err != nil {
			return err
		}
		sealed, err := creds.sealWebhookSecret(m.ID, secret)
		if err != nil {
			return err
		}
		m.WebhookSecretCiphertext = sealed
		return tx.UpdateMerchant(ctx, m)
	})
	if err != nil {
		return CreatedMerchant{}, fmt.Errorf("invoice: create merchant: %w", err)
	}
	return CreatedMerchant{Merchant: m, APIKey: key, WebhookSecret: secret}, nil
}

// invalidMerchant names the merchant field at fault; it matches
// ErrInvalidMerchant. A syntax error has a reason ("<field> must be
// <reason>", 400); a MerchantRules refusal a status, code and detail.
type invalidMerchant struct {
	field, reason string
	code, detail  string
}

func (e *invalidMerchant) Error() string {
	if e.detail != "" {
		return ErrInvalidMerchant.Error() + ": " + e.code + ": " + e.detail
	}
	return ErrInvalidMerchant.Error() + ": " + e.field + " must be " + e.reason
}

func (e *invalidMerchant) Is(target error) bool { return target == ErrInvalidMerchant }

func validateMerchant(name, webhookURL string, settlement common.Address) error {
	if len(name) > 200 || strings.ContainsRune(name, 0) {
		return &invalidMerchant{field: "name", reason: "at most 200 bytes, no NUL"}
	}
	if reason := textProblem(name, false); reason != "" {
		return &invalidMerchant{field: "name", reason: reason}
	}
	if err := validateWebhookURL(webhookURL); err != nil {
		return err
	}
	if settlement == (common.Address{}) {
		return &invalidMerchant{field: "settlement_address", reason: "set, and not the zero address"}
	}
	return nil
}

func validateWebhookURL(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || len(s) > 2048 || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.User != nil || u.Fragment != "" {
		return &invalidMerchant{field: "webhook_url", reason: "an absolute http(s) URL without user info or fragment, at most 2048 bytes"}
	}
	return nil
}

// MerchantUpdate changes a merchant's profile; nil fields stay as they are.
type MerchantUpdate struct {
	Name              *string
	WebhookURL        *string
	SettlementAddress *common.Address
	// Tolerance replaces the underpayment tolerance of fiat invoices
	// created from now on (open invoices keep theirs).
	Tolerance *store.MerchantTolerance
	// ChangedBy says who makes the change, recorded in the
	// merchant.settlement_address_changed event when SettlementAddress
	// changes ("owner_key", "operator", "user:<id>"). Defaults to "owner_key".
	ChangedBy string
}

// UpdateMerchant applies u to merchant id and returns the result. The
// webhook URL and settlement address it sets must pass Config.Merchants;
// those checks (a database lookup, a chain call) run before the update's
// transaction, so that no row lock waits on the chain. A new settlement
// address — where every sweep goes from now on — is written with its
// merchant.settlement_address_changed event in the same transaction and
// logged; who may change it is the caller's decision (the HTTP API: the
// merchant's own key only).
func (s *Service) UpdateMerchant(ctx context.Context, id int64, u MerchantUpdate) (store.Merchant, error) {
	if u.WebhookURL != nil {
		if err := validateWebhookURL(*u.WebhookURL); err != nil {
			return store.Merchant{}, err
		}
	}
	if u.SettlementAddress != nil && *u.SettlementAddress == (common.Address{}) {
		return store.Merchant{}, &invalidMerchant{field: "settlement_address", reason: "set, and not the zero address"}
	}
	if err := s.cfg.Merchants.check(ctx, s.st, u.WebhookURL, u.SettlementAddress); err != nil {
		return store.Merchant{}, err
	}
	var change *api.SettlementAddressChange
	m, err := s.changeMerchant(ctx, id, func(tx store.Tx, m *store.Merchant) error {
		if u.SettlementAddress != nil && *u.SettlementAddress != m.SettlementAddress {
			change = &api.SettlementAddressChange{MerchantID: m.ID, Previous: store.ChecksumAddress(m.SettlementAddress),
				Current: store.ChecksumAddress(*u.SettlementAddress), ChangedBy: cmp.Or(u.ChangedBy, "owner_key"), ChangedAt: s.now()}
			ev, err := api.SettlementAddressChangedEvent(*change)
			if err != nil {
				return err
			}
			if err := tx.InsertEvent(ctx, &ev); err != nil {
				return err
			}
		}
		if u.Name != nil {
			m.Name = *u.Name
		}
		if u.WebhookURL != nil {
			m.WebhookURL = *u.WebhookURL
		}
		if u.SettlementAddress != nil {
			m.SettlementAddress = *u.SettlementAddress
		}
		if u.Tolerance != nil {
			if err := u.Tolerance.Validate(); err != nil {
				return &invalidMerchant{field: "underpayment_tolerance", reason: err.Error()}
			}
			m.Tolerance = *u.Tolerance
		}
		return validateMerchant(m.Name, m.WebhookURL, m.SettlementAddress)
	})
	if err == nil && change != nil {
		s.log.WarnContext(ctx, "invoice: settlement address changed: every sweep goes to the new address from now on",
			slog.Int64("merchant_id", id), slog.String("previous", change.Previous.String()),
			slog.String("settlement_address", change.Current.String()), slog.String("changed_by", change.ChangedBy))
	}
	return m, err
}

// RotateAPIKey gives merchant id a new api_key, shown once. The old key
// stops working at once, in every replica. It is the operator's recovery
// of a lost key: it replaces whatever key is current.
func (s *Service) RotateAPIKey(ctx context.Context, id int64) (store.Merchant, string, error) {
	return s.rotateAPIKeyFrom(ctx, id, nil)
}

// rotateAPIKeyFrom rotates merchant id's api_key if, under the merchant's
// row lock, its current key still has the lookup digest current (nil: any
// key). A merchant rotating with a key that a concurrent rotation has just
// replaced gets ErrUnauthorized, exactly like a request made after that
// rotation, so that every key handed out is the one that works.
func (s *Service) rotateAPIKeyFrom(ctx context.Context, id int64, current []byte) (store.Merchant, string, error) {
	var key string
	var old []byte
	m, err := s.changeMerchant(ctx, id, func(_ store.Tx, m *store.Merchant) error {
		if current != nil && subtle.ConstantTimeCompare(m.APIKeyDigest, current) != 1 {
			return ErrUnauthorized
		}
		k, digest, hash, prefix, err := s.creds.newAPIKey()
		if err != nil {
			return err
		}
		key, old = k, m.APIKeyDigest
		m.APIKeyDigest, m.APIKeyHash, m.APIKeyPrefix = digest, hash, prefix
		return nil
	})
	if err != nil {
		return store.Merchant{}, "", err
	}
	s.auth.forget(old)
	return m, key, nil
}

// RotateWebhookSecret gives merchant id a new webhook secret, shown once.
// Webhooks are signed with it from the next attempt on.
func (s *Service) RotateWebhookSecret(ctx context.Context, id int64) (store.Merchant, string, error) {
	var secret string
	m, err := s.changeMerchant(ctx, id, func(_ store.Tx, m *store.Merchant) error {
		sec, err := newWebhookSecret()
		if err != nil {
			return err
		}
		sealed, err := s.creds.sealWebhookSecret(m.ID, sec)
		if err != nil {
			return err
		}
		secret, m.WebhookSecretCiphertext = sec, sealed
		return nil
	})
	if err != nil {
		return store.Merchant{}, "", err
	}
	return m, secret, nil
}

// DisableMerchant makes every credential of merchant id invalid at once.
func (s *Service) DisableMerchant(ctx context.Context, id int64) (store.Merchant, error) {
	return s.changeMerchant(ctx, id, func(_ store.Tx, m *store.Merchant) error {
		if m.DisabledAt == nil {
			now := s.now()
			m.DisabledAt = &now
		}
		return nil
	})
}

// changeMerchant reads merchant id under a row lock, applies change and
// writes it back in one transaction.
func (s *Service) changeMerchant(ctx context.Context, id int64, change func(store.Tx, *store.Merchant) error) (store.Merchant, error) {
	var m store.Merchant
	err := s.st.InTx(ctx, func(tx store.Tx) error {
		var err error
		if m, err = tx.GetMerchantForUpdate(ctx, id); err != nil {
			return err
		}
		if err := change(tx, &m); err != nil {
			return err
		}
		m.UpdatedAt = s.now()
		return tx.UpdateMerchant(ctx, m)
	})
	if err != nil {
		return store.Merchant{}, fmt.Errorf("invoice: merchant %d: %w", id, err)
	}
	return m, nil
}
