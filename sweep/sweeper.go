package sweep

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethereum/go-ethereum/core/types"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/api"
)

// Sweeper moves confirmed invoices' funds to their merchants' settlement
// addresses and keeps the sweep wallet funded. Several Sweepers (in one or
// several processes) can share one PostgreSQL database: they claim
// invoices with leases and the gas funder runs under a named lock.
type Sweeper struct {
	st    Store
	chain Chain
	keys  Keys
	cfg   Config
	log   *slog.Logger
	m     *metrics
	admin *Admin

	paths tokenPaths // detected token sweep paths

	mu      sync.Mutex
	chainID *big.Int
	signer  types.Signer
	// highest is the highest head a pass of this process has worked
	// against: a node whose head is below it is behind (a lagging replica,
	// a resync, a chain swapped for a fresh one) and is waited for.
	highest uint64

	// alerted holds the stuck transactions already alerted on (tx hash and
	// reason), so that the error log and metric fire once per process.
	alerted sync.Map

	// walletsRecorded: the sweep wallet and gas funder are in the store's
	// service wallets (ledger.go).
	walletsRecorded atomic.Bool
	// failedRechecked: the top-ups recorded FAILED were looked at again
	// (recheck.go).
	failedRechecked atomic.Bool

	// tipHook, set by tests only, replaces the node's suggested tip: a tip
	// below the miner's minimum makes the simulated node accept a
	// transaction and never mine it, as Cosmos EVM nodes do.
	tipHook func() *big.Int
}

// New returns a Sweeper. It makes no network call: the chain id is read by
// the first pass.
func New(st Store, chain Chain, keys Keys, cfg Config) (*Sweeper, error) {
	if err := store.CheckFinality(cfg.Finality, int(min(cfg.Confirmations, 1<<31))); err != nil {
		return nil, fmt.Errorf("sweep: %w", err)
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if st == nil || chain == nil {
		return nil, errors.New("sweep: a store and a chain are required")
	}
	if keys.Deposits == nil {
		return nil, errors.New("sweep: Keys.Deposits is required")
	}
	if cfg.Policy == PolicySponsor && keys.Wallet == nil {
		return nil, errors.New("sweep: Keys.Wallet (the sweep wallet) is required under the sponsor policy")
	}
	if keys.Wallet != nil && keys.Funder != nil && keys.Wallet.Address() == keys.Funder.Address() {
		return nil, errors.New("sweep: the gas funder and the sweep wallet must be different accounts")
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Sweeper{st: st, chain: chain, keys: keys, cfg: cfg, log: cfg.Logger, m: m,
		admin: &Admin{st: st, cfg: cfg, log: cfg.Logger}}, nil
}

// Run sweeps until ctx is cancelled. It looks at the chain head every
// PollInterval and makes a pass on every new head (and at least every
// IdleInterval): the gas funder first, then every due invoice. When ctx is
// cancelled it finishes the invoices it is working on, hands back the ones
// it claimed but did not start, and returns nil. A node that does not
// answer is logged and asked again at the next poll, from the start too:
// each pass reads the chain id until it has it.
func (s *Sweeper) Run(ctx context.Context) error {
	work := context.WithoutCancel(ctx)
	t := time.NewTicker(s.cfg.PollInterval)
	defer t.Stop()
	var last uint64
	var lastPass time.Time
	for {
		head, err := s.chain.BlockNumber(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			s.log.WarnContext(ctx, "sweep: read block number", slog.String("error", err.Error()))
		case head != last || s.cfg.Now().Sub(lastPass) >= s.cfg.IdleInterval:
			last, lastPass = head, s.cfg.Now()
			if err := s.runOnce(work, ctx.Done()); err != nil {
				s.log.WarnContext(ctx, "sweep: pass", slog.String("error", err.Error()))
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// RunOnce makes one pass, what Run does on each new block: the gas funder
// tops the sweep wallet up if needed, stored transactions stuck behind a
// nonce gap are re-broadcast, then every due invoice is advanced as far as
// the chain allows. Tests and hosts that drive blocks themselves call it
// after each block.
func (s *Sweeper) RunOnce(ctx context.Context) error {
	return s.runOnce(ctx, nil)
}

func (s *Sweeper) runOnce(ctx context.Context, stop <-chan struct{}) error {
	if _, err := s.loadChainID(ctx); err != nil {
		return err
	}
	if err := s.checkChain(ctx); err != nil {
		s.log.ErrorContext(ctx, "sweep: pass stopped: the chain guard refused the node; nothing is broadcast",
			slog.String("error", err.Error()))
		return err
	}
	p, err := s.newPass(ctx)
	if err != nil {
		return err
	}
	if err := s.recheckFailed(ctx, p); err != nil {
		s.log.WarnContext(ctx, "sweep: looking again at failed top-ups", slog.String("error", err.Error()))
	}
	if err := s.tendAccounts(ctx, p); err != nil {
		s.log.WarnContext(ctx, "sweep: gas funder", slog.String("error", err.Error()))
	}
	if err := s.ledgerPass(ctx, p); err != nil {
		s.log.WarnContext(ctx, "sweep: ledger", slog.String("error", err.Error()))
	}
	// Refunds and payouts first: a refund that may leave from a deposit
	// address takes it before that invoice's sweep in the same pass.
	if err := s.outboundsDue(ctx, p, stop); err != nil {
		if ctx.Err() != nil {
			return err
		}
		s.log.WarnContext(ctx, "sweep: outbounds", slog.String("error", err.Error()))
	}
	return s.sweepDue(ctx, p, stop)
}

func (s *Sweeper) loadChainID(ctx context.Context) (*big.Int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.chainID != nil {
		return s.chainID, nil
	}
	id, err := s.chain.ChainID(ctx)
	if err != nil {
		return nil, fmt.Errorf("sweep: read chain id: %w", err)
	}
	s.chainID, s.signer = id, types.LatestSignerForChainID(id)
	return id, nil
}

// sweepDue claims due invoices in batches and advances each once. An
// invoice released in this pass is due again just after the pass's time,
// so a pass never claims it twice.
func (s *Sweeper) sweepDue(ctx context.Context, p *pass, stop <-chan struct{}) error {
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	for !stopped() {
		invs, err := s.st.ClaimSweeps(ctx, p.now, s.cfg.Lease, s.cfg.BatchSize)
		if err != nil {
			return fmt.Errorf("sweep: claim: %w", err)
		}
		if len(invs) == 0 {
			return nil
		}
		sem := make(chan struct{}, s.cfg.Workers)
		var wg sync.WaitGroup
		for _, inv := range invs {
			sem <- struct{}{}
			if stopped() || ctx.Err() != nil {
				<-sem
				s.handBack(ctx, inv.ID)
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				s.process(ctx, p, inv)
			}()
		}
		wg.Wait()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if len(invs) < s.cfg.BatchSize {
			return nil
		}
	}
	return nil
}

// handBack releases the lease of an invoice claimed but not worked on.
func (s *Sweeper) handBack(ctx context.Context, id int64) {
	err := s.updateInvoice(ctx, id, func(inv *store.Invoice) bool {
		inv.SweepLockedUntil = nil
		return true
	})
	if err != nil {
		s.log.WarnContext(ctx, "sweep: hand back", slog.Int64("invoice_id", id), slog.String("error", err.Error()))
	}
}

// process advances one claimed invoice and writes the outcome.
func (s *Sweeper) process(ctx context.Context, p *pass, inv store.Invoice) {
	out, err := s.advance(ctx, p, inv)
	if err != nil {
		if ctx.Err() != nil {
			return // shutting down (or a crash): the lease runs out and another pass picks it up
		}
		s.log.WarnContext(ctx, "sweep: transient error", slog.Int64("invoice_id", inv.ID), slog.String("error", err.Error()))
		retry := p.now.Add(s.cfg.RetryBackoff)
		out = outcome{retryAt: &retry}
	}
	if err := s.settle(ctx, p, inv, out); err != nil && ctx.Err() == nil {
		s.log.WarnContext(ctx, "sweep: record outcome", slog.Int64("invoice_id", inv.ID), slog.String("error", err.Error()))
	}
}

// outcome is what a pass decided for an invoice.
type outcome struct {
	// status is the sweep status the invoice's transactions imply
	// (QUEUED, FUNDING or SENT); "" keeps the stored one.
	status string
	// sweepErr replaces sweep_error when non-nil (the last error of a sweep
	// still being retried, or "" once it moves on).
	sweepErr *string
	// attempt counts one retry against MaxAttempts.
	attempt bool
	// fail, when set, marks the sweep FAILED with this reason.
	fail string
	// swept, when set, finishes the sweep.
	swept *sweptResult
	// retryAt delays the next attempt; nil means the next pass.
	retryAt *time.Time
}

type sweptResult struct {
	tx   store.SweepTx
	dust store.Amount
	// amount, when set, is what reached the merchant (a token sweep's
	// base units); otherwise the transaction's value.
	amount *store.Amount
}

func wait(status string) outcome { return outcome{status: status} }

func failWith(reason string) outcome { return outcome{fail: reason} }

func retryWith(status, reason string) outcome {
	return outcome{status: status, sweepErr: &reason, attempt: true}
}

// settle writes an outcome to the invoice, re-reading it under a row lock
// so that settlement's concurrent changes are kept, and releases the lease.
func (s *Sweeper) settle(ctx context.Context, p *pass, claimed store.Invoice, out outcome) error {
	now := s.cfg.Now().UTC()
	var (
		event string
		swept store.Amount // what reached the merchant, in the invoice's asset
	)
	err := s.inTx(ctx, func(tx store.Tx) error {
		inv, err := tx.GetInvoiceForUpdate(ctx, claimed.ID)
		if err != nil {
			return err
		}
		inv.SweepLockedUntil = nil
		event = ""
		switch inv.SweepStatus {
		case store.SweepQueued, store.SweepFunding, store.SweepSent:
		default:
			// Changed under us (re-queued or finished elsewhere): only
			// hand the lease back.
			return tx.UpdateInvoice(ctx, &inv)
		}
		inv.UpdatedAt = now
		if out.attempt && out.fail == "" && out.swept == nil {
			if inv.SweepAttempts >= s.cfg.MaxAttempts {
				// Out of retries: FAILED with the last error.
				out.fail = ReasonNotMined
				if out.sweepErr != nil && *out.sweepErr != "" {
					out.fail = *out.sweepErr
				}
			} else {
				inv.SweepAttempts++
			}
		}
		switch {
		case out.swept != nil:
			h := out.swept.tx.TxHash
			dust := out.swept.dust
			swept = out.swept.tx.ValueWei
			if out.swept.amount != nil {
				swept = *out.swept.amount
			}
			inv.SweepStatus, inv.SweepTxHash, inv.SweptWei, inv.DustWei = store.SweepSwept, &h, &swept, &dust
			inv.SweepError, inv.SweepNextAttemptAt = "", nil
			if inv.Status == store.StatusConfirmed {
				inv.Status, inv.SettledAt = store.StatusSettled, &now
				event = store.EventInvoiceSettled
			} else {
				// Settlement moved the invoice back (a reorg of its
				// payment) after the funds left: an operator must look.
				inv.NeedsAttention = true
			}
		case out.fail != "":
			inv.SweepStatus, inv.SweepError, inv.SweepNextAttemptAt = store.SweepFailed, out.fail, nil
			event = store.EventInvoiceSweepFailed
		default:
			if out.status != "" {
				inv.SweepStatus = out.status
			}
			if out.sweepErr != nil {
				inv.SweepError = *out.sweepErr
			}
			next := p.now.Add(time.Microsecond)
			if out.retryAt != nil {
				next = *out.retryAt
			}
			inv.SweepNextAttemptAt = &next
		}
		if err := tx.UpdateInvoice(ctx, &inv); err != nil {
			return err
		}
		if event == "" {
			return nil
		}
		var extra map[string]any
		if inv.IsFiat() {
			// A fiat invoice's events list its payments with their values.
			ps, err := tx.ListPaymentsByInvoice(ctx, inv.ID)
			if err != nil {
				return err
			}
			if len(ps) > 0 {
				extra = map[string]any{"payments": api.NewPayments(inv, ps)}
			}
		}
		ev, err := api.InvoiceEvent(event, inv, now, extra)
		if err != nil {
			return err
		}
		return tx.InsertEvent(ctx, &ev)
	})
	if err != nil {
		return err
	}
	switch event {
	case store.EventInvoiceSettled:
		s.m.swept.Inc()
		// swept is in the invoice's asset (base units of its token for a
		// token invoice, whose sweep transaction's value is 0); dust is
		// native coin left at the deposit address.
		s.log.InfoContext(ctx, "sweep: settled", slog.Int64("invoice_id", claimed.ID),
			slog.String("tx_hash", out.swept.tx.TxHash.Hex()), slog.String("asset", claimed.Asset().String()),
			slog.String("swept", swept.String()), slog.String("dust_wei", out.swept.dust.String()))
	case store.EventInvoiceSweepFailed:
		s.m.failed.WithLabelValues(out.fail).Inc()
		s.log.WarnContext(ctx, "sweep: failed", slog.Int64("invoice_id", claimed.ID), slog.String("sweep_error", out.fail))
	}
	return nil
}

// updateInvoice applies change to the current row under a row lock;
// change reports whether to write.
func (s *Sweeper) updateInvoice(ctx context.Context, id int64, change func(*store.Invoice) bool) error {
	return updateInvoice(ctx, s.st, id, change)
}

// updateInvoice applies change to an invoice under its row lock, retrying
// when a concurrent writer (settlement) won the optimistic version check.
func updateInvoice(ctx context.Context, st Store, id int64, change func(*store.Invoice) bool) error {
	return inTx(ctx, st, func(tx store.Tx) error {
		inv, err := tx.GetInvoiceForUpdate(ctx, id)
		if err != nil {
			return err
		}
		if !change(&inv) {
			return nil
		}
		return tx.UpdateInvoice(ctx, &inv)
	})
}

// inTx runs fn in a database transaction, again (up to three times) when
// it loses an optimistic race (store.ErrConflict on an invoice version).
func (s *Sweeper) inTx(ctx context.Context, fn func(store.Tx) error) error {
	return inTx(ctx, s.st, fn)
}

// inTx runs fn in a transaction, again (up to three times in all) when it
// lost an optimistic update to a concurrent writer.
func inTx(ctx context.Context, st Store, fn func(store.Tx) error) error {
	var err error
	for range 3 {
		if err = st.InTx(ctx, fn); !errors.Is(err, store.ErrConflict) {
			return err
		}
	}
	return err
}
