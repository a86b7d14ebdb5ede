package invoice

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/evmpay/evmpay/hdwallet"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/api"
	"github.com/evmpay/evmpay/store/problem"
)

// invoiceRequest is a validated POST /v1/invoices body.
type invoiceRequest struct {
	chain       *chain       // the chain the invoice is on (chain_id)
	asset       store.Asset  // the native coin, or a configured token
	amount      store.Amount // base units of asset
	expiresIn   time.Duration
	orderID     string
	description string
	metadata    []byte
	redirectURL string
	// fiat is set for an invoice priced in a fiat currency (asset and
	// amount then come from its quotes).
	fiat *fiatRequest
}

// View is an invoice as the merchant API shows it (api.Invoice)
// with the QR URLs, and the lookup token and checkout URL in a create
// response only.
type View struct {
	api.Invoice
	QRPNGURL    string `json:"qr_png_url"`
	QRSVGURL    string `json:"qr_svg_url"`
	LookupToken string `json:"lookup_token,omitempty"`
	// CheckoutURL is the payer's page, the lookup token in its fragment:
	// like the token, only in a create response.
	CheckoutURL string `json:"checkout_url,omitempty"`
}

func (s *Service) view(inv store.Invoice) View {
	base := s.cfg.BaseURL + "/v1/invoices/" + strconv.FormatInt(inv.ID, 10)
	return View{Invoice: api.NewInvoice(inv), QRPNGURL: base + "/qr.png", QRSVGURL: base + "/qr.svg"}
}

// response is what a create request answers, first or replayed.
type response struct {
	status    int
	body      []byte
	invoiceID int64
	replayed  bool
}

// requestFingerprint is SHA-256 over method, path and body: the same key
// with a different fingerprint is a different request (422).
func requestFingerprint(method, path string, body []byte) []byte {
	h := sha256.New()
	for _, part := range [][]byte{[]byte(method), []byte(path), body} {
		var n [8]byte
		l := uint64(len(part))
		for i := range n {
			n[i] = byte(l >> (8 * (7 - i)))
		}
		h.Write(n[:])
		h.Write(part)
	}
	return h.Sum(nil)
}

// maxClaimAttempts bounds the loop that races other requests for a key
// (insert, read, claim): each round is lost only to a request that made
// progress, so a few rounds always settle it.
const maxClaimAttempts = 4

// createInvoice runs an idempotent invoice creation for merchant m.
//
// Protocol: an IN_FLIGHT record for (merchant, key) is committed first
// (with those of concurrent requests: keys.go), so that a concurrent
// request with the key finds it (409). Then one
// transaction takes the next derivation index, inserts the invoice, and
// completes the record with the sealed response, only if the record is
// still held under this request's lease; the requests of this process
// share that transaction (group commit, batch.go). A request whose process
// dies leaves an IN_FLIGHT record whose lease ends after IdempotencyLease;
// a retry then claims it. A request that fails without committing deletes
// its record so that the key can be retried at once.
func (s *Service) createInvoice(ctx context.Context, m store.Merchant, key string, fp []byte, req invoiceRequest) (response, error) {
	now := s.now()
	rec := store.IdempotencyRecord{
		MerchantID: m.ID, Key: key, RequestHash: fp, Status: store.IdempotencyInFlight,
		LockedUntil: now.Add(s.cfg.IdempotencyLease), CreatedAt: now, ExpiresAt: now.Add(s.cfg.IdempotencyTTL),
	}
	owned := false
	for attempt := 0; attempt < maxClaimAttempts && !owned; attempt++ {
		err := s.keys.create(ctx, rec)
		if err == nil {
			owned = true
			break
		}
		if !errors.Is(err, store.ErrConflict) {
			return response{}, err
		}
		prev, err := s.st.GetIdempotencyRecord(ctx, m.ID, key)
		if errors.Is(err, store.ErrNotFound) {
			continue // released meanwhile: insert again
		}
		if err != nil {
			return response{}, err
		}
		if !bytes.Equal(prev.RequestHash, fp) {
			return response{}, problem.Of(problem.CodeKeyReused,
				"this Idempotency-Key was used with a different request (method, path or body)")
		}
		if prev.Status == store.IdempotencyDone {
			return s.replay(m.ID, key, prev)
		}
		if prev.LockedUntil.After(now) {
			return response{}, errInFlight
		}
		err = s.st.ClaimIdempotencyRecord(ctx, rec, now)
		if err == nil {
			owned = true
		} else if !errors.Is(err, store.ErrConflict) {
			return response{}, err
		}
	}
	if !owned {
		return response{}, errInFlight
	}

	// A replay needs no chain; a new invoice needs its chains watched.
	if perr := s.chainsRunning(req); perr != nil {
		s.release(ctx, rec)
		return response{}, perr
	}
	// A fiat price is quoted with the key held (a replay of a request
	// already answered never needs a rate) and before anything else is
	// written: without a rate, the key is released and nothing is created.
	var prices *store.Pricing
	if req.fiat != nil {
		var err error
		if prices, err = s.quote(ctx, m, req.fiat, now.Add(req.expiresIn)); err != nil {
			s.release(ctx, rec)
			return response{}, err
		}
	}
	token, tokenHash, err := newLookupToken()
	if err != nil {
		s.release(ctx, rec)
		return response{}, err
	}
	s.addrs.prefetch()
	j := &createJob{m: m, key: key, rec: rec, req: req, now: now, token: token, tokenHash: tokenHash,
		pricing: prices, done: make(chan createResult, 1)}
	s.batcher.submit(j)
	var r createResult
	select {
	case r = <-j.done:
	case <-ctx.Done():
		if !s.batcher.withdraw(j) {
			// Already in a transaction: its outcome stands (an invoice
			// committed with this key is replayed to the client's retry).
			r = <-j.done
			break
		}
		// Withdrawn before any transaction: nothing was committed.
		r.err = context.Cause(ctx)
	}
	if r.err != nil {
		// Nothing was committed for this key: free it for a retry (a lease
		// expiry would free it anyway).
		s.release(ctx, rec)
		if errors.Is(r.err, store.ErrConflict) && errors.Is(r.err, errLeaseLost) {
			return response{}, errInFlight
		}
		return response{}, r.err
	}
	return r.resp, nil
}

// chainsRunning refuses req when a chain it names — the invoice's, and
// for a fiat invoice each accepted asset's — has its parts stopped
// (Config.ChainStopped).
func (s *Service) chainsRunning(req invoiceRequest) *problem.Problem {
	if s.cfg.ChainStopped == nil {
		return nil
	}
	ids := []uint64{req.chain.id}
	if req.fiat != nil {
		ids = append(ids, req.fiat.chains...)
	}
	for _, id := range ids {
		if s.cfg.ChainStopped(id) != nil {
			return problem.Of(problem.CodeChainUnavailable, fmt.Sprintf("chain %d takes no invoices for now: "+
				"its indexer, settlement and sweep stopped (the operator's /readyz says why); "+
				"create the invoice on another chain, or retry once the operator has fixed its node", id))
		}
	}
	return nil
}

// release deletes rec if it is still IN_FLIGHT under its own lease.
func (s *Service) release(ctx context.Context, rec store.IdempotencyRecord) {
	err := s.st.ReleaseIdempotencyRecord(context.WithoutCancel(ctx), rec.MerchantID, rec.Key, rec.LockedUntil)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.log.WarnContext(ctx, "release idempotency key", slog.Int64("merchant_id", rec.MerchantID),
			slog.String("error", err.Error()))
	}
}

var (
	errInFlight = problem.Of(problem.CodeKeyInFlight,
		"a request with this Idempotency-Key is still being processed; retry later")
	errLeaseLost = errors.New("idempotency lease lost")
)

func (s *Service) replay(merchantID int64, key string, rec store.IdempotencyRecord) (response, error) {
	if rec.ResponseStatus == nil {
		return response{}, fmt.Errorf("invoice: idempotency record %q of merchant %d is DONE without a response", key, merchantID)
	}
	body, err := s.creds.openResponse(merchantID, key, rec.ResponseBody)
	if err != nil {
		return response{}, err
	}
	r := response{status: *rec.ResponseStatus, body: body, replayed: true}
	if rec.InvoiceID != nil {
		r.invoiceID = *rec.InvoiceID
	}
	return r, nil
}

// newInvoice is j's invoice before it has an index, an address and an id.
func (s *Service) newInvoice(j *createJob) *store.Invoice {
	inv := &store.Invoice{
		MerchantID: j.m.ID, Status: store.StatusPending, AmountWei: j.req.amount, ChainID: j.req.chain.id,
		OrderID: j.req.orderID, Description: j.req.description, Metadata: j.req.metadata, RedirectURL: j.req.redirectURL,
		LookupTokenHash: j.tokenHash, ExpiresAt: j.now.Add(j.req.expiresIn), CreatedAt: j.now, UpdatedAt: j.now,
		SweepStatus: store.SweepNone,
	}
	inv.SetAsset(j.req.asset) // the native coin too: its symbol is in the invoice's JSON
	if j.pricing != nil {
		// A fiat invoice is shown in its first quote's asset and amount.
		inv.Pricing = j.pricing
		inv.SetAsset(j.pricing.Quotes[0].Asset)
		inv.AmountWei = j.pricing.Quotes[0].Amount
	}
	return inv
}

// completion is j's response to inv (what the client gets, the lookup
// token included) and the DONE record holding it sealed.
func (s *Service) completion(j *createJob, inv *store.Invoice) ([]byte, store.IdempotencyRecord, error) {
	v := s.view(*inv)
	v.LookupToken = j.token
	v.CheckoutURL = s.cfg.CheckoutURL + "#" + j.token
	body, err := json.Marshal(v)
	if err != nil {
		return nil, store.IdempotencyRecord{}, err
	}
	sealed, err := s.creds.sealResponse(j.m.ID, j.key, body)
	if err != nil {
		return nil, store.IdempotencyRecord{}, err
	}
	status := http.StatusCreated
	done := j.rec
	done.Status = store.IdempotencyDone
	done.ResponseStatus = &status
	done.ResponseBody = sealed
	done.InvoiceID = &inv.ID
	return body, done, nil
}

// insertInvoice is the one transaction that makes j's invoice alone (a
// batch of one, or a member retried on its own). The counter row behind
// NextDerivationIndex stays locked until commit, so the work between it
// and the commit is kept to an address lookup, two statements and the
// sealing of the response.
func (s *Service) insertInvoice(ctx context.Context, j *createJob) (response, error) {
	inv := s.newInvoice(j)
	var body []byte
	err := s.st.InTx(ctx, func(tx store.Tx) error {
		if err := s.assignAddress(ctx, tx, inv); err != nil {
			return err
		}
		if err := tx.CreateInvoice(ctx, inv); err != nil {
			return err
		}
		var (
			done store.IdempotencyRecord
			err  error
		)
		if body, done, err = s.completion(j, inv); err != nil {
			return err
		}
		if err := tx.CompleteIdempotencyRecord(ctx, done); err != nil {
			if errors.Is(err, store.ErrConflict) {
				return fmt.Errorf("%w: %w", errLeaseLost, err)
			}
			return err
		}
		return nil
	})
	if err != nil {
		return response{}, err
	}
	s.log.DebugContext(ctx, "invoice created", slog.Int64("invoice_id", inv.ID), slog.Int64("merchant_id", j.m.ID),
		slog.Uint64("derivation_index", uint64(inv.DerivationIndex)))
	return response{status: http.StatusCreated, body: body, invoiceID: inv.ID}, nil
}

// insertInvoices makes the invoices of several jobs in one transaction:
// one counter update reserving len(jobs) indexes, one multi-row insert, one
// update completing every record under its own lease, one commit. Any
// failure rolls all of it back (no index is used); the caller then retries
// the jobs one by one.
func (s *Service) insertInvoices(ctx context.Context, jobs []*createJob) ([]response, error) {
	invs := make([]*store.Invoice, len(jobs))
	for i, j := range jobs {
		invs[i] = s.newInvoice(j)
	}
	bodies := make([][]byte, len(jobs))
	err := s.st.InTx(ctx, func(tx store.Tx) error {
		first, err := tx.ReserveDerivationIndexes(ctx, len(jobs))
		if err != nil {
			return err
		}
		for i, inv := range invs {
			err := s.setAddress(inv, first+uint32(i))
			if errors.Is(err, hdwallet.ErrInvalidChild) {
				err = s.assignAddress(ctx, tx, inv) // an index past the reserved range
			}
			if err != nil {
				return err
			}
		}
		if err := tx.CreateInvoices(ctx, invs); err != nil {
			return err
		}
		recs := make([]store.IdempotencyRecord, len(jobs))
		for i, j := range jobs {
			if bodies[i], recs[i], err = s.completion(j, invs[i]); err != nil {
				return err
			}
		}
		if err := tx.CompleteIdempotencyRecords(ctx, recs); err != nil {
			if errors.Is(err, store.ErrConflict) {
				return fmt.Errorf("%w: %w", errLeaseLost, err)
			}
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]response, len(jobs))
	for i, inv := range invs {
		out[i] = response{status: http.StatusCreated, body: bodies[i], invoiceID: inv.ID}
	}
	s.log.DebugContext(ctx, "invoices created", slog.Int("count", len(jobs)),
		slog.Uint64("first_derivation_index", uint64(invs[0].DerivationIndex)))
	return out, nil
}

// assignAddress takes the next derivation index and its address. BIP-32
// says to skip an index whose key is invalid (probability below 2^-127);
// the skipped index has no address a wallet could scan, so it is no gap.
func (s *Service) assignAddress(ctx context.Context, tx store.Tx, inv *store.Invoice) error {
	for {
		idx, err := tx.NextDerivationIndex(ctx)
		if err != nil {
			return err
		}
		err = s.setAddress(inv, idx)
		if !errors.Is(err, hdwallet.ErrInvalidChild) {
			return err
		}
	}
}

// setAddress gives inv derivation index idx, its address and the payment
// URI naming it. hdwallet.ErrInvalidChild when idx has no address.
func (s *Service) setAddress(inv *store.Invoice, idx uint32) error {
	addr, err := s.addrs.address(idx)
	if err != nil {
		return err
	}
	uri, err := paymentURI(inv.ChainID, inv.Asset(), addr, inv.AmountWei)
	if err != nil {
		return err
	}
	inv.DerivationIndex, inv.DepositAddress, inv.PaymentURI = idx, addr, uri
	if inv.Pricing != nil {
		// Every quote gets its own request to the one deposit address.
		if inv.Pricing, err = s.withQuoteURIs(inv.Pricing, inv); err != nil {
			return err
		}
	}
	return nil
}
