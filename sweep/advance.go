package sweep

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/evmpay/evmpay/store"
)

// advance moves one invoice's sweep as far as the chain allows in this
// pass, by its asset's path: the native coin (native.go) or a token
// (token.go: permit, or funding through the step native sponsored sweeps
// share, funded.go). Its state is derived from the chain and the stored
// transactions each time, so that a crash at any point resumes where it
// was; the error is for transient failures only (the invoice is retried
// after RetryBackoff).
func (s *Sweeper) advance(ctx context.Context, p *pass, inv store.Invoice) (outcome, error) {
	inv = sweptAs(inv)
	txs, err := s.st.ListSweepTxsByInvoice(ctx, inv.ID)
	if err != nil {
		return outcome{}, err
	}
	if err := s.depositHeld(ctx, s.st, inv.ID); err != nil {
		if !errors.Is(err, errDepositHeld) {
			return outcome{}, err
		}
		// A refund is being sent from the deposit address: the sweep
		// waits for it (outbound.go), looking again at the next pass.
		return outcome{}, nil
	}
	if token := invoiceToken(inv); token != nil {
		return s.advanceToken(ctx, p, inv, *token, txs)
	}
	return s.advanceNative(ctx, p, inv, txs)
}

// sweptAs is an invoice as its sweep sees it. An invoice priced in a fiat
// currency may have been paid in any of its quoted assets, several at
// once: it is swept in the asset settlement chose when it queued the sweep
// (SweepAsset: the native coin when some arrived, else the first quoted
// token that did), exactly as an invoice in that asset; the other assets
// that arrived follow, by the machinery that moves wrong-asset payments
// (wrongasset.go): each token in full, the native coin last paying its own
// gas (docs/tokens.md).
func sweptAs(inv store.Invoice) store.Invoice {
	if inv.IsFiat() && inv.SweepAsset != nil {
		inv.SetAsset(*inv.SweepAsset)
	}
	return inv
}

// precheck runs before anything is signed for an invoice. stop reports an
// outcome that ends this pass for it.
func (s *Sweeper) precheck(ctx context.Context, p *pass, inv store.Invoice) (o outcome, stop bool, err error) {
	if inv.Status != store.StatusConfirmed {
		// Settlement moved it (a reorg of its payment): leave it be.
		retry := p.now.Add(s.cfg.RetryBackoff)
		return outcome{retryAt: &retry}, true, nil
	}
	if s.chainID.Sign() <= 0 || !s.chainID.IsUint64() || inv.ChainID != s.chainID.Uint64() {
		return failWith(ReasonChainMismatch), true, nil
	}
	addr, err := s.keys.Deposits.Address(inv.DerivationIndex)
	if err != nil {
		return outcome{}, true, err
	}
	if addr != inv.DepositAddress {
		return failWith(ReasonKeyMismatch), true, nil
	}
	n, err := s.nonceAt(ctx, p, inv.DepositAddress)
	if err != nil {
		return outcome{}, true, err
	}
	base, err := s.depositBase(ctx, inv)
	if err != nil {
		return outcome{}, true, err
	}
	if n != base {
		return failWith(ReasonDepositSpent), true, nil
	}
	if _, reason, err := s.target(ctx, p, inv); reason != "" || err != nil {
		return failWith(reason), true, err
	}
	return outcome{}, false, nil
}

// target returns the merchant's settlement address, or why it cannot be
// swept to.
func (s *Sweeper) target(ctx context.Context, p *pass, inv store.Invoice) (common.Address, string, error) {
	m, err := s.st.GetMerchant(ctx, inv.MerchantID)
	if err != nil {
		return common.Address{}, "", err
	}
	if m.SettlementAddress == (common.Address{}) {
		return common.Address{}, ReasonNoSettlementAddress, nil
	}
	code, err := s.chain.CodeAt(ctx, m.SettlementAddress, p.headNumber())
	if err != nil {
		return common.Address{}, "", err
	}
	if len(code) > 0 {
		return common.Address{}, ReasonSettlementIsContract, nil
	}
	own, err := s.serviceAddress(ctx, m.SettlementAddress)
	if err != nil {
		return common.Address{}, "", err
	}
	if own {
		s.log.ErrorContext(ctx, "sweep: refusing to sweep to an address of this service", slog.Int64("invoice_id", inv.ID),
			slog.Int64("merchant_id", m.ID), slog.String("settlement_address", m.SettlementAddress.Hex()))
		return common.Address{}, ReasonSettlementIsService, nil
	}
	if to, ok, err := s.reserveTarget(ctx, p, inv); err != nil || ok {
		return to, "", err
	}
	return m.SettlementAddress, "", nil
}

// reserveTarget is the merchant's payout wallet when it holds less of the
// invoice's asset than the merchant's reserve for it (PayoutPolicy): the
// sweep then tops the reserve up with the whole invoice instead of going
// to the settlement address (docs/refunds.md). ok is false otherwise.
func (s *Sweeper) reserveTarget(ctx context.Context, p *pass, inv store.Invoice) (common.Address, bool, error) {
	policy, err := s.st.GetPayoutPolicy(ctx, inv.MerchantID)
	if errors.Is(err, store.ErrNotFound) {
		return common.Address{}, false, nil
	}
	if err != nil {
		return common.Address{}, false, err
	}
	reserve := policy.For(invoiceToken(inv)).Reserve
	if reserve == nil || reserve.IsZero() {
		return common.Address{}, false, nil
	}
	w, err := s.st.GetPayoutWallet(ctx, inv.MerchantID)
	if errors.Is(err, store.ErrNotFound) {
		return common.Address{}, false, nil
	}
	if err != nil {
		return common.Address{}, false, err
	}
	held, err := s.assetAvailable(ctx, p, w.Address, invoiceToken(inv))
	if err != nil || held.Cmp(reserve.Big()) >= 0 {
		return common.Address{}, false, err
	}
	s.log.InfoContext(ctx, "sweep: to the payout wallet, below its reserve", slog.Int64("invoice_id", inv.ID),
		slog.String("payout_wallet", w.Address.Hex()), slog.String("held", held.String()), slog.String("reserve", reserve.String()))
	return w.Address, true, nil
}

func (s *Sweeper) depositSigner(inv store.Invoice) signFunc {
	return func(ctx context.Context, tx *types.Transaction) (*types.Transaction, error) {
		return s.keys.Deposits.SignTx(ctx, inv.DerivationIndex, tx, s.signer)
	}
}

func (s *Sweeper) walletSigner(ctx context.Context, tx *types.Transaction) (*types.Transaction, error) {
	return s.keys.Wallet.SignTx(ctx, tx, s.signer)
}

// walletSend signs, stores and broadcasts a new transaction of the sweep
// wallet for an invoice (sp.invoice) — a funding, a permit, a transferFrom
// — at a fresh fee with a reserved nonce, if the wallet can pay its value
// and gas. rec is the stored transaction, nil when nothing was signed.
func (s *Sweeper) walletSend(ctx context.Context, p *pass, sp spec) (rec *store.SweepTx, o outcome, err error) {
	sp.fee, sp.from = s.freshFee(p), s.keys.Wallet.Address()
	sp.reserve, sp.sign = true, s.walletSigner
	ok, err := s.reserveWallet(ctx, p, new(big.Int).Add(sp.value, gasCost(cmp.Or(sp.gas, transferGas), sp.fee.cap)))
	if err != nil {
		return nil, outcome{}, err
	}
	if !ok {
		return nil, failWith(ReasonInsufficientGas), nil
	}
	if sp.nonce, err = s.pendingNonce(ctx, p, sp.from); err != nil {
		return nil, outcome{}, err
	}
	signed, err := s.signAndStore(ctx, p, sp)
	if err != nil {
		return nil, outcome{}, err
	}
	o, err = s.afterFirstBroadcast(ctx, p, &signed, sp.invoice.status)
	return &signed, o, err
}

// afterFirstBroadcast broadcasts a just-stored transaction and maps the
// node's answer to the invoice's outcome.
func (s *Sweeper) afterFirstBroadcast(ctx context.Context, p *pass, rec *store.SweepTx, status string) (outcome, error) {
	c, err := s.broadcast(ctx, p, rec)
	if err != nil {
		if c == classTransient && ctx.Err() == nil {
			// Stored: the next pass re-broadcasts the same bytes.
			return outcome{status: status, sweepErr: new(string)}, nil
		}
		return outcome{}, err
	}
	switch c {
	case classOK, classAlreadyKnown, classNonceTooHigh:
		return outcome{status: status, sweepErr: new(string)}, nil
	case classInsufficientFunds:
		if rec.Kind == store.SweepTxFunding {
			return failWith(ReasonInsufficientGas), nil
		}
		return retryWith(status, ReasonInsufficientGas), nil
	case classRejected:
		return failWith(rec.LastError), nil
	default: // underpriced, nonce too low: the next pass replaces or re-checks
		return retryWith(status, c.String()), nil
	}
}
