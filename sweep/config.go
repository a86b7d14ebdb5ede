package sweep

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/api"
)

// Policy decides who pays the gas of a sweep.
type Policy string

const (
	// PolicySponsor: the sweep wallet sends the deposit address exactly the
	// gas its sweep can cost (gas limit × fee cap) and the merchant receives
	// exactly what the payer sent. Gas the sweep did not spend (fee cap above
	// the price actually paid) stays at the deposit address and is recorded
	// as the invoice's dust_wei.
	PolicySponsor Policy = "sponsor"
	// PolicyDeduct: one transaction from the deposit address sends its
	// balance minus gas limit × fee cap; the merchant pays the gas. Unspent
	// gas is recorded as dust the same way.
	PolicyDeduct Policy = "deduct"
)

// Valuer tells what an amount of an asset is worth now in a currency,
// rounded down to its minor unit (invoice/pricing's Pricer.CurrentValue).
type Valuer interface {
	CurrentValue(ctx context.Context, asset store.Asset, amount store.Amount, currency string) (store.Fiat, error)
}

// Config configures a Sweeper. The zero value is usable: every field has a
// default.
type Config struct {
	// Policy decides who pays the gas of a sweep. Defaults to PolicySponsor.
	Policy Policy
	// Confirmations a sweep transaction needs before the invoice is
	// SETTLED: a transaction in block b with head h has h − b
	// confirmations. Defaults to 12 (none under FinalityInstant and
	// FinalityTag, which refuse a count).
	Confirmations uint64
	// Finality is the chain's finality mode: store.FinalityDepth
	// (Confirmations), store.FinalityInstant (a transaction is final once
	// mined) or store.FinalityTag (a transaction is final once its block is
	// at or below the finalized block the indexer recorded,
	// store.FinalityStore, read once per pass; nothing is final while none
	// is recorded: the indexer must run with the same Finality). The same
	// rule applies to what the sweeper reads from the indexed chain (the
	// ledger's inflows, merchant-paid refunds and payouts). Defaults to
	// store.FinalityDepth.
	Finality string
	// MinGasPrice is the chain's minimum gas price in wei (on Cosmos EVM
	// chains the feemarket's min_gas_price): every transaction offers at
	// least this effective price per gas. Defaults to 0.
	MinGasPrice store.Amount
	// MaxFeePerGas is the absolute ceiling of the fee cap of every
	// transaction, replacements included: a stuck transaction is never
	// re-priced above it (the sweeper stops replacing it and raises an
	// operator alert instead). Defaults to the larger of 1,000 gwei
	// (DefaultMaxFeePerGas) and 10 × MinGasPrice.
	MaxFeePerGas store.Amount
	// ReplaceAfterBlocks: a transaction the node accepted but did not mine
	// within this many blocks is replaced (same nonce, fee bumped by at
	// least 12.5%). Defaults to 3.
	ReplaceAfterBlocks uint64
	// MaxAttempts bounds the retries of one sweep — replacements,
	// "nonce too low" and "underpriced" retries: the retry after the
	// MaxAttempts-th marks it FAILED with its last error instead. The
	// operator retry endpoint resets the count (an operator's decision to
	// try again). It is also the replacement cap of a gas top-up: its
	// nonce is re-signed at most MaxAttempts times, counted from the
	// stored transactions (restarts and replicas included); then the
	// sweeper stops re-pricing it, keeps re-broadcasting it as it is, and
	// raises an operator alert. Defaults to 6.
	MaxAttempts int
	// PollInterval is how often Run looks at the chain head; a pass runs on
	// every new head. Defaults to 1s.
	PollInterval time.Duration
	// IdleInterval: Run makes a pass at least this often even when no new
	// block arrived (for retries scheduled in time). Defaults to 15s.
	IdleInterval time.Duration
	// Workers is how many invoices one process advances concurrently.
	// Defaults to 8.
	Workers int
	// BatchSize is how many invoices one claim leases. Defaults to 100.
	BatchSize int
	// Lease is how long a claimed invoice is held by one worker; a worker
	// that dies loses it after this long. Defaults to 1m.
	Lease time.Duration
	// RetryBackoff delays an invoice after a transient error (node or
	// database unreachable). Defaults to 15s.
	RetryBackoff time.Duration
	// GasReserve is the sweep wallet balance below which the gas funder
	// tops it up (to twice the reserve). Defaults to 0: derived, the larger
	// of GasReserveFloor and the sweep wallet's gas spend of the last 24
	// hours.
	GasReserve store.Amount
	// GasReserveFloor is the smallest derived reserve. Defaults to 1e17 wei
	// (0.1 of a native unit).
	GasReserveFloor store.Amount
	// TokenPaths chooses, per ERC-20 token contract, how its sweeps pay
	// their gas: TokenPathPermit or TokenPathFund. Defaults to nil: each
	// token's path is detected (permit when the token answers EIP-2612's
	// DOMAIN_SEPARATOR() and nonces(address) and the deposit signer can
	// sign digests, fund otherwise).
	TokenPaths map[common.Address]TokenPath
	// Tokens are the accepted ERC-20 tokens: the ledger follows them into
	// the service's wallets (opening balances, funding from outside) and
	// the reconciliation compares their balances. Defaults to none: the
	// native coin only.
	Tokens []common.Address
	// ChainGuard, when set, is asked before any stored signed transaction
	// is broadcast or re-broadcast (sweeps, fundings, top-ups,
	// replacements) and at the start of every pass: on an error nothing
	// is sent, the pass stops with an error log, and WalletStatus shows
	// the error in its Alerts. It is how a host refuses to send to a node
	// that serves another chain than the one the transactions were signed
	// for (same chain id, another chain: a reset dev chain, a wrong node).
	// It is called often: keep it cheap (cache). Defaults to nil: no check.
	ChainGuard ChainGuard
	// OperatorToken authenticates the admin endpoints (Authorization:
	// Bearer). Defaults to "": the admin endpoints answer 503.
	OperatorToken string
	// Registerer receives the sweep metrics. Defaults to nil: metrics are
	// kept but not registered.
	Registerer prometheus.Registerer
	// Valuer values the gas of a fiat-priced invoice's transactions in the
	// invoice's currency at the rate of the moment the fee is recorded
	// (just after its block), stored with the ledger entry. Defaults to
	// nil: such a fee is valued, when the ledger is read, at the invoice's
	// locked quote of the native coin where it quoted one, and has no fiat
	// value otherwise. *pricing.Pricer satisfies it.
	Valuer Valuer
	// NativeSymbol is the chain's native coin as the Valuer knows it
	// (the symbol the invoices name it by). Defaults to "ETH".
	NativeSymbol string
	// Logger receives progress and errors (never a key). Defaults to a
	// logger that discards.
	Logger *slog.Logger
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

// ChainGuard checks that the node still serves the chain the stored
// transactions were signed for.
type ChainGuard interface {
	// CheckChain returns an error when the node's chain is not the one
	// the service's data belongs to (or cannot be checked now).
	CheckChain(ctx context.Context) error
}

// DefaultMaxFeePerGas is the smallest default MaxFeePerGas: 1,000 gwei.
func DefaultMaxFeePerGas() *big.Int { return big.NewInt(1_000_000_000_000) }

func (c Config) withDefaults() Config {
	c.Policy = cmp.Or(c.Policy, PolicySponsor)
	c.NativeSymbol = cmp.Or(c.NativeSymbol, api.DefaultNativeSymbol)
	if store.FinalityCountsConfirmations(c.Finality) {
		c.Confirmations = cmp.Or(c.Confirmations, 12)
	}
	c.ReplaceAfterBlocks = cmp.Or(c.ReplaceAfterBlocks, 3)
	c.MaxAttempts = cmp.Or(c.MaxAttempts, 6)
	c.PollInterval = cmp.Or(c.PollInterval, time.Second)
	c.IdleInterval = cmp.Or(c.IdleInterval, 15*time.Second)
	c.Workers = cmp.Or(c.Workers, 8)
	c.BatchSize = cmp.Or(c.BatchSize, 100)
	c.Lease = cmp.Or(c.Lease, time.Minute)
	c.RetryBackoff = cmp.Or(c.RetryBackoff, 15*time.Second)
	if c.MaxFeePerGas.IsZero() {
		c.MaxFeePerGas = amountOf(bigMax(DefaultMaxFeePerGas(), new(big.Int).Mul(c.MinGasPrice.Big(), big.NewInt(10))))
	}
	if c.GasReserveFloor.IsZero() {
		c.GasReserveFloor = store.NewAmount(1e17)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

func (c Config) validate() error {
	if err := store.CheckFinality(c.Finality, int(min(c.Confirmations, 1<<31))); err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	switch c.Policy {
	case PolicySponsor, PolicyDeduct:
	default:
		return fmt.Errorf("sweep: unknown policy %q (want %q or %q)", c.Policy, PolicySponsor, PolicyDeduct)
	}
	if c.MaxAttempts < 1 {
		return errors.New("sweep: MaxAttempts must be positive")
	}
	if c.Workers < 1 || c.BatchSize < 1 {
		return errors.New("sweep: Workers and BatchSize must be positive")
	}
	if c.BatchSize > 1000 {
		return errors.New("sweep: BatchSize is at most 1000")
	}
	if c.PollInterval <= 0 || c.IdleInterval <= 0 || c.Lease <= 0 || c.RetryBackoff <= 0 {
		return errors.New("sweep: intervals must be positive")
	}
	if c.Lease < 10*time.Second {
		return errors.New("sweep: Lease must be at least 10s")
	}
	for token, path := range c.TokenPaths {
		switch path {
		case "", TokenPathPermit, TokenPathFund:
		default:
			return fmt.Errorf("sweep: token %s: unknown path %q (want %q or %q)", token.Hex(), path, TokenPathPermit, TokenPathFund)
		}
	}
	if c.MaxFeePerGas.Cmp(c.MinGasPrice) < 0 {
		return errors.New("sweep: MaxFeePerGas is below MinGasPrice")
	}
	return nil
}

// DefaultGasReserveFloor returns GasReserveFloor's default, 1e17 wei.
func DefaultGasReserveFloor() *big.Int { return big.NewInt(1e17) }
