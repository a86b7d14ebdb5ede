package sweep

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"strings"
	"sync"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/evmpay/evmpay/store"
)

// TokenPath is how the sweeps of an ERC-20 token reach the merchant with
// the service paying the gas.
type TokenPath string

const (
	// TokenPathPermit: the deposit key signs an EIP-2612 permit off-chain
	// for the sweep wallet; the sweep wallet sends permit and then
	// transferFrom(deposit, settlement address, balance) itself. No native
	// coin ever goes to the deposit address.
	TokenPathPermit TokenPath = "permit"
	// TokenPathFund: the sweep wallet sends the deposit address exactly the
	// gas of its token transfer (estimated gas + 20%, × fee cap), and once
	// that funding's receipt is seen the deposit key sends transfer. The
	// gas not spent is the invoice's dust_wei.
	TokenPathFund TokenPath = "fund"
)

// Gas figures of token sweeps.
const (
	// gasMarginDiv: a token call's gas limit is its estimate + estimate/5
	// (20%), for state that changes between the estimate and the block.
	gasMarginDiv = 5
	// pullAllowanceGas is added to the estimate of transfer(…) from the
	// deposit to price a transferFrom whose permit is not mined yet (so
	// that transferFrom itself cannot be estimated): reading and clearing
	// the allowance.
	pullAllowanceGas = 30_000
)

// ReasonTokenTransferFailed: the token's transfer or transferFrom reverted,
// returned false, or was mined without moving the tokens (no Transfer
// event from the deposit address to the settlement address).
const ReasonTokenTransferFailed = "token transfer failed"

// ReasonPermitRefused: the token's permit reverted when simulated, so
// nothing was signed into a transaction or sent (a token that exposes
// EIP-2612's functions but refuses permits; a wrong-asset token on the
// permit path has no funding fallback).
const ReasonPermitRefused = "permit refused by the token; nothing sent"

// DepositHashSigner signs a 32-byte digest for a deposit address, for
// EIP-2612 permits; it returns a 65-byte [R ‖ S ‖ V] signature.
// *hdwallet.Wallet implements it. A DepositSigner without it sweeps every
// token by TokenPathFund.
type DepositHashSigner interface {
	SignHash(ctx context.Context, index uint32, hash common.Hash) ([]byte, error)
}

// invoiceToken returns the token an invoice is for, nil for the native
// coin.
func invoiceToken(inv store.Invoice) *common.Address { return inv.Asset().Token() }

// tokenPaths caches the path detected for each token.
type tokenPaths struct {
	mu sync.Mutex
	m  map[common.Address]TokenPath
}

// tokenPath returns the path configured for token (Config.TokenPaths), or
// detects it once: permit when the deposit signer can sign digests and the
// token answers DOMAIN_SEPARATOR() and nonces(address) (EIP-2612), fund
// otherwise. Each permit is also simulated before it is signed into a
// transaction (advancePermit), so a token that only looks like EIP-2612
// falls back to funding.
func (s *Sweeper) tokenPath(ctx context.Context, p *pass, token common.Address) (TokenPath, error) {
	if path, ok := s.cfg.TokenPaths[token]; ok && path != "" {
		if path == TokenPathPermit && !s.canSignPermits() {
			return TokenPathFund, nil
		}
		return path, nil
	}
	s.paths.mu.Lock()
	path, ok := s.paths.m[token]
	s.paths.mu.Unlock()
	if ok {
		return path, nil
	}
	path = TokenPathFund
	if s.canSignPermits() {
		var err error
		if path, err = s.detectPermit(ctx, p, token); err != nil {
			return "", err
		}
	}
	s.paths.mu.Lock()
	if s.paths.m == nil {
		s.paths.m = map[common.Address]TokenPath{}
	}
	s.paths.m[token] = path
	s.paths.mu.Unlock()
	s.log.InfoContext(ctx, "sweep: token path", slog.String("token", token.Hex()), slog.String("path", string(path)))
	return path, nil
}

func (s *Sweeper) canSignPermits() bool {
	_, ok := s.keys.Deposits.(DepositHashSigner)
	return ok && s.keys.Wallet != nil
}

// detectPermit tells whether token takes EIP-2612 permits: it must answer
// DOMAIN_SEPARATOR() and nonces(address), and a permit signed by a
// throw-away key must simulate (eth_call from the sweep wallet): some tokens
// expose the first two and revert every permit. The reason for the fund path
// is logged.
func (s *Sweeper) detectPermit(ctx context.Context, p *pass, token common.Address) (TokenPath, error) {
	head := p.headNumber()
	fund := func(reason string) (TokenPath, error) {
		s.log.InfoContext(ctx, "sweep: token does not take permits; its sweeps fund the deposit's gas",
			slog.String("token", token.Hex()), slog.String("reason", reason))
		return TokenPathFund, nil
	}
	var domain common.Hash
	for _, name := range []string{"DOMAIN_SEPARATOR", "nonces"} {
		var call []byte
		if name == "nonces" {
			call = packCall("nonces", common.Address{})
		} else {
			call = packCall("DOMAIN_SEPARATOR")
		}
		out, err := s.chain.CallContract(ctx, ethereum.CallMsg{To: &token, Data: call}, head)
		if isRevert(err) || err == nil && len(out) != 32 {
			return fund("no " + name + "()")
		}
		if err != nil {
			return "", fmt.Errorf("detect permit of %s: %w", token.Hex(), err)
		}
		if name == "DOMAIN_SEPARATOR" {
			domain = common.BytesToHash(out)
		}
	}
	// A permit of 1 base unit by a throw-away owner (nonce 0) to the sweep
	// wallet: nothing is signed by a key of the service.
	key, err := crypto.GenerateKey()
	if err != nil {
		return "", err
	}
	owner, wallet := crypto.PubkeyToAddress(key.PublicKey), s.keys.Wallet.Address()
	digest := permitDigest(domain, owner, wallet, big.NewInt(1), new(big.Int), permitDeadline)
	sig, err := crypto.Sign(digest[:], key)
	if err != nil {
		return "", err
	}
	data, err := permitCall(owner, wallet, big.NewInt(1), sig)
	if err != nil {
		return "", err
	}
	_, err = s.chain.CallContract(ctx, ethereum.CallMsg{From: wallet, To: &token, Data: data}, head)
	if isRevert(err) {
		return fund("a permit reverts in simulation: " + err.Error())
	}
	if err != nil {
		return "", fmt.Errorf("detect permit of %s: %w", token.Hex(), err)
	}
	return TokenPathPermit, nil
}

// isRevert reports a call the node executed and that failed (as opposed to
// a node that did not answer).
func isRevert(err error) bool {
	if err == nil {
		return false
	}
	msg := strings.ToLower(err.Error())
	if strings.Contains(msg, "revert") || strings.Contains(msg, "invalid opcode") || strings.Contains(msg, "out of gas") {
		return true
	}
	var de rpc.DataError
	return errors.As(err, &de)
}

// withMargin is a gas estimate plus 20%.
func withMargin(gas uint64) uint64 { return gas + gas/gasMarginDiv }

// advanceToken moves a token invoice's sweep. The path is the one its
// stored transactions took, or for a new sweep the token's.
func (s *Sweeper) advanceToken(ctx context.Context, p *pass, inv store.Invoice, token common.Address, txs []store.SweepTx) (outcome, error) {
	seen, base := fingerprintOf(txs), depositBaseOf(txs, inv.DepositAddress)
	txs = ownTxs(txs)
	t := tokenSweep{
		token:   token,
		seen:    seen,
		nonce:   base,
		permits: groupSlots(txsTo(txs, token), store.SweepTxPermit),
		pulls:   groupSlots(txsTo(txs, token), store.SweepTxPull),
		fund:    groupSlots(txs, store.SweepTxFunding),
		sweeps:  groupSlots(txs, store.SweepTxSweep),
		natives: groupSlots(txs, store.SweepTxNative),
	}
	switch {
	case len(t.permits)+len(t.pulls) > 0:
		return s.advancePermit(ctx, p, inv, &t)
	case len(t.fund)+len(t.sweeps) > 0:
		return s.advanceFund(ctx, p, inv, &t)
	}
	if o, stop, err := s.precheck(ctx, p, inv); stop || err != nil {
		return o, err
	}
	path, err := s.tokenPath(ctx, p, token)
	if err != nil {
		return outcome{}, err
	}
	if path == TokenPathPermit {
		return s.advancePermit(ctx, p, inv, &t)
	}
	return s.advanceFund(ctx, p, inv, &t)
}

// tokenSweep is an invoice's token and its stored transactions by kind.
type tokenSweep struct {
	token                        common.Address
	seen                         fingerprint
	permits, pulls, fund, sweeps []*slot
	natives                      []*slot // wrong-asset native coin, after the token
	// wrong: the token is a wrong-asset payment swept after the invoice's
	// own sweep (sweepWrongTokens): no precheck of the deposit's nonce, no
	// fallback to funding, and its end is the transferFrom's confirmation.
	wrong bool
	// nonce is the deposit's nonce for its transfer on the fund path: 0 for
	// the invoice's own token (after any refunds sent from the deposit
	// before its sweep: depositBaseOf), the deposit's next one for a
	// wrong token.
	nonce               uint64
	permit, pull, sweep *slot // the live one of each kind, if any
}

// guard is the invoice check of a transaction of this sweep, the invoice's
// sweep status becoming status; a wrong token's transactions carry it.
func (t *tokenSweep) guard(inv store.Invoice, status string) *invoiceGuard {
	g := &invoiceGuard{id: inv.ID, seen: t.seen, status: status}
	if t.wrong {
		token := t.token
		g.wrongToken = &token
	}
	return g
}

func liveSlot(slots []*slot) *slot {
	var live *slot
	for _, sl := range slots {
		if sl.live() != nil {
			live = sl
		}
	}
	return live
}

// advancePermit: the sweep wallet sends the deposit key's permit and then
// transferFrom. Both are the wallet's own transactions (consecutive nonces,
// so transferFrom is never mined before the permit). A permit that
// reverts because someone else submitted the same signed permit first is
// harmless: the allowance is in place and transferFrom succeeds; only
// transferFrom's outcome decides the sweep.
func (s *Sweeper) advancePermit(ctx context.Context, p *pass, inv store.Invoice, t *tokenSweep) (outcome, error) {
	if s.keys.Wallet == nil {
		return failWith(ReasonNoWallet), nil
	}
	t.permit, t.pull = liveSlot(t.permits), liveSlot(t.pulls)
	for _, sl := range []*slot{t.permit, t.pull} {
		if sl != nil {
			if err := s.refresh(ctx, p, sl); err != nil {
				return outcome{}, err
			}
		}
	}
	if t.pull != nil && t.pull.mined != nil {
		if t.wrong {
			return s.confirmToken(p, inv, t.token, t.pull, nil)
		}
		return s.finishToken(ctx, p, inv, t, t.pull, nil)
	}
	if t.pull != nil {
		if t.permit != nil && t.permit.mined == nil {
			if o, done, err := s.tendWalletTx(ctx, p, inv, t, t.permit, store.SweepSent); done || err != nil {
				return o, err
			}
		}
		if o, done, err := s.tendWalletTx(ctx, p, inv, t, t.pull, store.SweepSent); done || err != nil {
			return o, err
		}
		return outcome{status: store.SweepSent}, nil
	}

	// No transferFrom yet: sign what is missing.
	if t.permit == nil && len(t.pulls) == 0 && len(t.permits) > 0 && !t.wrong {
		// Every earlier permit's nonce went to another transaction: start
		// over (below), as for a new sweep.
		if o, stop, err := s.precheck(ctx, p, inv); stop || err != nil {
			return o, err
		}
	}
	to, reason, err := s.target(ctx, p, inv)
	if reason != "" || err != nil {
		return failWith(reason), err
	}
	wallet := s.keys.Wallet.Address()
	head := p.headNumber()
	var value *big.Int
	if t.permit != nil {
		c, err := decodeTokenCall(t.permit.live().RawTx)
		if err != nil {
			return outcome{}, err
		}
		value = c.value
	} else {
		if value, err = callUint(ctx, s.chain, t.token, head, "balanceOf", inv.DepositAddress); err != nil {
			return outcome{}, err
		}
		if value.Sign() == 0 {
			return failWith(ReasonNothingToSweep), nil
		}
	}
	allowance, err := callUint(ctx, s.chain, t.token, head, "allowance", inv.DepositAddress, wallet)
	if err != nil {
		return outcome{}, err
	}
	allowed := allowance.Cmp(value) >= 0
	if t.permit == nil && !allowed {
		o, signed, err := s.sendPermit(ctx, p, inv, t, value)
		if !signed || err != nil {
			return o, err
		}
	}

	// transferFrom. With the allowance in place it is simulated and
	// estimated as it is; before the permit is mined, its gas is that of
	// transfer from the deposit plus the allowance's.
	pull := packCall("transferFrom", inv.DepositAddress, to, value)
	var gas uint64
	if allowed {
		out, err := s.chain.CallContract(ctx, ethereum.CallMsg{From: wallet, To: &t.token, Data: pull}, head)
		if isRevert(err) || err == nil && returnsFalse(out) {
			return failWith(ReasonTokenTransferFailed), nil
		}
		if err != nil {
			return outcome{}, err
		}
		if gas, err = s.chain.EstimateGas(ctx, ethereum.CallMsg{From: wallet, To: &t.token, Data: pull}); err != nil {
			return outcome{}, err
		}
	} else {
		est, err := s.estimateTransfer(ctx, p, inv.DepositAddress, t.token, to, value)
		if err != nil || est == 0 {
			return failWith(ReasonTokenTransferFailed), err
		}
		gas = est + pullAllowanceGas
	}
	return s.sendWalletTx(ctx, p, inv, t, store.SweepTxPull, pull, withMargin(gas))
}

// sendPermit signs the deposit's permit for value to the sweep wallet,
// simulates it, and stores and broadcasts the wallet's permit transaction.
// signed is false when the outcome ends the pass (a refusal, or the permit
// did not simulate and the invoice went the fund path).
func (s *Sweeper) sendPermit(ctx context.Context, p *pass, inv store.Invoice, t *tokenSweep, value *big.Int) (o outcome, signed bool, err error) {
	wallet := s.keys.Wallet.Address()
	head := p.headNumber()
	nonce, err := callUint(ctx, s.chain, t.token, head, "nonces", inv.DepositAddress)
	if err != nil {
		return outcome{}, false, err
	}
	out, err := s.chain.CallContract(ctx, ethereum.CallMsg{To: &t.token, Data: packCall("DOMAIN_SEPARATOR")}, head)
	if err != nil {
		return outcome{}, false, err
	}
	digest := permitDigest(common.BytesToHash(out), inv.DepositAddress, wallet, value, nonce, permitDeadline)
	sig, err := s.keys.Deposits.(DepositHashSigner).SignHash(ctx, inv.DerivationIndex, digest)
	if err != nil {
		return outcome{}, false, fmt.Errorf("sign permit: %w", err)
	}
	data, err := permitCall(inv.DepositAddress, wallet, value, sig)
	if err != nil {
		return outcome{}, false, err
	}
	gas, err := s.chain.EstimateGas(ctx, ethereum.CallMsg{From: wallet, To: &t.token, Data: data})
	if isRevert(err) {
		if len(t.permits) == 0 && !t.wrong {
			// The token does not take this permit: fund its gas instead.
			s.log.WarnContext(ctx, "sweep: permit does not simulate; funding the token transfer instead",
				slog.Int64("invoice_id", inv.ID), slog.String("token", t.token.Hex()))
			o, err := s.advanceFund(ctx, p, inv, t)
			return o, false, err
		}
		return failWith(ReasonPermitRefused), false, nil
	}
	if err != nil {
		return outcome{}, false, err
	}
	o, err = s.sendWalletTx(ctx, p, inv, t, store.SweepTxPermit, data, withMargin(gas))
	if err != nil || o.fail != "" || (o.sweepErr != nil && *o.sweepErr != "") {
		return o, false, err
	}
	return o, true, nil
}

// estimateTransfer estimates transfer(to, value) from the deposit address,
// after simulating it: 0 when it reverts or returns false.
func (s *Sweeper) estimateTransfer(ctx context.Context, p *pass, from, token, to common.Address, value *big.Int) (uint64, error) {
	msg := ethereum.CallMsg{From: from, To: &token, Data: packCall("transfer", to, value)}
	out, err := s.chain.CallContract(ctx, msg, p.headNumber())
	if isRevert(err) || err == nil && returnsFalse(out) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	gas, err := s.chain.EstimateGas(ctx, msg)
	if isRevert(err) {
		return 0, nil
	}
	return gas, err
}

// sendWalletTx signs, stores and broadcasts a sweep wallet call of the
// token (a permit or transferFrom) with a fresh fee and a reserved nonce.
func (s *Sweeper) sendWalletTx(ctx context.Context, p *pass, inv store.Invoice, t *tokenSweep, kind string, data []byte, gas uint64) (outcome, error) {
	rec, o, err := s.walletSend(ctx, p, spec{
		kind: kind, invoiceID: &inv.ID, to: t.token, value: new(big.Int), data: data, gas: gas,
		invoice: t.guard(inv, store.SweepSent),
	})
	if rec != nil {
		t.seen = fingerprint{count: t.seen.count + 1, maxID: max(t.seen.maxID, rec.ID)}
	}
	return o, err
}

// tendWalletTx keeps one of the sweep wallet's unmined token calls moving:
// re-broadcast, or replaced with a bumped fee (same nonce, same call) when
// stuck or refused as underpriced. done reports an outcome that ends the
// pass for the invoice.
func (s *Sweeper) tendWalletTx(ctx context.Context, p *pass, inv store.Invoice, t *tokenSweep, sl *slot, status string) (outcome, bool, error) {
	v, err := s.tend(ctx, p, sl)
	if err != nil {
		return outcome{}, true, err
	}
	live := sl.live()
	switch {
	case v.dead:
		// The nonce went to another transaction: the next pass signs the
		// step again with a new nonce (the allowance decides whether a
		// permit is still needed).
		if s.exhausted(inv) {
			return failWith(ReasonNonceTooLow), true, nil
		}
		return retryWith(status, ReasonNonceTooLow), true, nil
	case v.nonceWait:
		return retryWith(status, ReasonNonceTooLow), true, nil
	case v.class == classInsufficientFunds:
		return failWith(ReasonInsufficientGas), true, nil
	case v.class == classRejected:
		return failWith(live.LastError), true, nil
	case v.replace:
		f, o, ok := s.replaceFee(ctx, p, s.exhausted(inv), live, status)
		if !ok {
			return o, true, nil
		}
		extra := gasCost(live.GasLimit, new(big.Int).Sub(f.cap, live.MaxFeeWei.Big()))
		if ok, err := s.reserveWallet(ctx, p, extra); err != nil || !ok {
			if err != nil {
				return outcome{}, true, err
			}
			return failWith(ReasonInsufficientGas), true, nil
		}
		// The pass ends here for the invoice: t.seen is not used again.
		o, err := s.resend(ctx, p, live, f, s.walletSigner, t.guard(inv, status))
		return o, true, err
	}
	return outcome{}, false, nil
}

// confirmToken finishes a token sweep whose transfer (or transferFrom) is
// mined: it moved the tokens only if it succeeded and logged the Transfer
// from the deposit address to the settlement address. Once it has the
// configured confirmations the invoice is SWEPT with swept_wei the token
// amount (base units) and dust_wei the gas money the funding path left at
// the deposit address (Σ mined fundings − the transfer's fee; 0 for a
// permit).
func (s *Sweeper) confirmToken(p *pass, inv store.Invoice, token common.Address, sl *slot, fund []*slot) (outcome, error) {
	r := sl.receipt
	c, err := decodeTokenCall(sl.mined.RawTx)
	if err != nil {
		return outcome{}, err
	}
	if r.Status != types.ReceiptStatusSuccessful || !hasTransferLog(r, token, inv.DepositAddress, c.to, c.value) {
		return failWith(ReasonTokenTransferFailed), nil
	}
	if !s.final(p, r.BlockNumber.Uint64()) {
		return outcome{status: store.SweepSent, sweepErr: new(string)}, nil
	}
	mined := *sl.mined
	dust := new(big.Int)
	if mined.Kind == store.SweepTxSweep {
		for _, f := range fund {
			if f.mined != nil {
				dust.Add(dust, f.mined.ValueWei.Big())
			}
		}
		dust.Sub(dust, mined.FeeWei.Big())
		if dust.Sign() < 0 {
			dust.SetInt64(0)
		}
	}
	amount := amountOf(c.value)
	return outcome{swept: &sweptResult{tx: mined, dust: amountOf(dust), amount: &amount}}, nil
}
