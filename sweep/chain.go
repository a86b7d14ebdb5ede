package sweep

import (
	"context"
	"crypto/ecdsa"
	"fmt"
	"log/slog"
	"math/big"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/evmpay/evmpay/store"
)

// Chain is what the sweeper needs from an EVM node: exactly the methods it
// calls, each with the signature of go-ethereum's client, so that
// *ethclient.Client and the simulated backend's client satisfy it as they
// are, and an own implementation writes these 13 and nothing else.
type Chain interface {
	// ChainID is eth_chainId: transactions are signed for it.
	ChainID(ctx context.Context) (*big.Int, error)
	// BlockNumber is eth_blockNumber; HeaderByNumber eth_getBlockByNumber
	// (nil: the latest), for the head and its base fee.
	BlockNumber(ctx context.Context) (uint64, error)
	HeaderByNumber(ctx context.Context, number *big.Int) (*types.Header, error)
	// BalanceAt, NonceAt and CodeAt read an account at a block (nil:
	// latest); PendingNonceAt counts the node's pending transactions too.
	BalanceAt(ctx context.Context, account common.Address, blockNumber *big.Int) (*big.Int, error)
	NonceAt(ctx context.Context, account common.Address, blockNumber *big.Int) (uint64, error)
	PendingNonceAt(ctx context.Context, account common.Address) (uint64, error)
	CodeAt(ctx context.Context, account common.Address, blockNumber *big.Int) ([]byte, error)
	// CallContract and EstimateGas serve token sweeps: balances,
	// allowances, permit nonces, pre-flight calls, the gas of a transfer.
	CallContract(ctx context.Context, call ethereum.CallMsg, blockNumber *big.Int) ([]byte, error)
	EstimateGas(ctx context.Context, call ethereum.CallMsg) (uint64, error)
	// SuggestGasTipCap is eth_maxPriorityFeePerGas (it may be 0).
	SuggestGasTipCap(ctx context.Context) (*big.Int, error)
	// SendTransaction broadcasts a signed transaction; TransactionReceipt
	// reads its receipt (ethereum.NotFound while it is not mined).
	SendTransaction(ctx context.Context, tx *types.Transaction) error
	TransactionReceipt(ctx context.Context, txHash common.Hash) (*types.Receipt, error)
}

// Store is what the sweeper needs from the shared database; store.Store
// implementations satisfy it.
type Store interface {
	store.SweepStore
	GetInvoice(ctx context.Context, id int64) (store.Invoice, error)
	GetMerchant(ctx context.Context, id int64) (store.Merchant, error)
	// ListPaymentsByInvoice finds wrong-asset payments to sweep too.
	ListPaymentsByInvoice(ctx context.Context, invoiceID int64) ([]store.Payment, error)
	InTx(ctx context.Context, fn func(tx store.Tx) error) error
	TryLock(ctx context.Context, name string) (store.Lock, error)
	// Refunds and payouts (outbound.go), the ledger (ledger.go) and the
	// payout wallets' reserves.
	store.OutboundStore
	store.LedgerStore
	store.ServiceWalletStore
	GetPayoutPolicy(ctx context.Context, merchantID int64) (store.PayoutPolicy, error)
	GetCursor(ctx context.Context, name string) (store.Cursor, error)
	CompareAndSetCursor(ctx context.Context, name string, old *store.Cursor, next store.Cursor) error
	LatestBlock(ctx context.Context) (store.Block, error)
	// FinalizedBlock is the finalized block the indexer recorded, read
	// once per pass under finality "tag".
	FinalizedBlock(ctx context.Context) (number uint64, ok bool, err error)
	GetBlock(ctx context.Context, number uint64) (store.Block, error)
	GetTx(ctx context.Context, hash common.Hash) (store.Transaction, error)
	ListTokenTransfersByTx(ctx context.Context, hash common.Hash) ([]store.TokenTransfer, error)
}

// DepositSigner signs for the deposit addresses, by derivation index.
// *hdwallet.Wallet implements it; so can a KMS or HSM.
type DepositSigner interface {
	Address(index uint32) (common.Address, error)
	SignTx(ctx context.Context, index uint32, tx *types.Transaction, signer types.Signer) (*types.Transaction, error)
}

// AccountSigner signs for one account: the sweep wallet or the gas funder.
// NewKeySigner gives one over an in-memory key; a KMS can implement it.
type AccountSigner interface {
	Address() common.Address
	SignTx(ctx context.Context, tx *types.Transaction, signer types.Signer) (*types.Transaction, error)
}

// Keys are the signers a Sweeper uses.
type Keys struct {
	// Deposits signs sweeps from deposit addresses. Required.
	Deposits DepositSigner
	// Wallet is the sweep wallet, which pays the gas of sweeps under
	// PolicySponsor (for example NewKeySigner of hdwallet's
	// Wallet.SweepKey). Required under PolicySponsor.
	Wallet AccountSigner
	// Funder is the gas funder (GAS_FUNDER_PRIVATE_KEY), which tops the
	// sweep wallet up when it runs low. Optional: nil disables top-ups.
	Funder AccountSigner
	// Retired are keys rotated out (old sweep wallets and gas funders):
	// each pass drains their balance to the key that took over (drain.go).
	// Optional.
	Retired []Retired
	// Payouts signs for the merchants' payout wallets, which send the
	// refunds and payouts the service pays (outbound.go): *hdwallet.Wallet
	// derives them (m/44'/60'/2'/0/<merchant id>). Optional: without it
	// such outbounds wait (refunds may still leave from a deposit address).
	Payouts PayoutSigner
}

// KeySigner is an AccountSigner over an in-memory private key. It prints
// as its address only: the key never reaches a log or an error.
type KeySigner struct {
	key  *ecdsa.PrivateKey
	addr common.Address
}

// NewKeySigner returns a signer for key.
func NewKeySigner(key *ecdsa.PrivateKey) *KeySigner {
	return &KeySigner{key: key, addr: crypto.PubkeyToAddress(key.PublicKey)}
}

// Address returns the account's address.
func (k *KeySigner) Address() common.Address { return k.addr }

// SignTx signs tx with the key.
func (k *KeySigner) SignTx(_ context.Context, tx *types.Transaction, signer types.Signer) (*types.Transaction, error) {
	return types.SignTx(tx, signer, k.key)
}

// String returns the address; the key is never printed.
func (k *KeySigner) String() string { return "KeySigner(" + k.addr.Hex() + ")" }

// GoString is String, for %#v.
func (k *KeySigner) GoString() string { return k.String() }

// Format prints String under every verb.
func (k *KeySigner) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(k.String())) }

// LogValue logs the address only.
func (k *KeySigner) LogValue() slog.Value { return slog.StringValue(k.String()) }

// pass is what one pass over the due sweeps knows about the chain: the head
// it works against (every balance, nonce and receipt is read at or below
// it), the fee market, and per-account state shared by the invoices
// processed concurrently.
type pass struct {
	now     time.Time
	number  uint64
	baseFee *big.Int // 0 when the chain reports none
	tip     *big.Int // suggested tip, at least 1 wei

	mu      sync.Mutex
	nonces  map[common.Address]uint64 // NonceAt(head)
	pending map[common.Address]uint64 // PendingNonceAt, read once per pass
	// avail is each sending account's balance not yet committed to a
	// transaction (the sweep wallet's, a payout wallet's), read once per
	// pass and drawn down as transactions are signed.
	avail map[common.Address]*big.Int

	// finalized is the finalized block the indexer recorded, read at the
	// start of the pass under finality "tag"; hasFinalized is false when
	// none is recorded (or under another mode).
	finalized    uint64
	hasFinalized bool
}

// final reports whether a transaction mined in block is final at the
// pass's head: block is at or below the head (a receipt of a block newer
// than the pass's head waits for the next pass) with the configured
// confirmations on top (none under store.FinalityInstant); under
// store.FinalityTag, at or below the finalized block recorded when the
// pass started (never while none is recorded).
func (s *Sweeper) final(p *pass, block uint64) bool {
	if s.cfg.Finality == store.FinalityTag {
		return block <= p.number && p.hasFinalized && block <= p.finalized
	}
	return block <= p.number && p.number-block >= s.cfg.Confirmations
}

// finalIndexed is the highest final block of the indexed chain whose
// highest block is head: head − Confirmations; under store.FinalityTag the
// finalized block recorded when the pass started, at most head. ok is
// false when no block is final yet.
func (s *Sweeper) finalIndexed(p *pass, head uint64) (block uint64, ok bool) {
	if s.cfg.Finality == store.FinalityTag {
		return min(p.finalized, head), p.hasFinalized
	}
	if head < s.cfg.Confirmations {
		return 0, false
	}
	return head - s.cfg.Confirmations, true
}

func (s *Sweeper) newPass(ctx context.Context) (*pass, error) {
	head, err := s.chain.HeaderByNumber(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("sweep: read chain head: %w", err)
	}
	tip, err := s.chain.SuggestGasTipCap(ctx)
	if err != nil {
		return nil, fmt.Errorf("sweep: suggest gas tip: %w", err)
	}
	if s.tipHook != nil {
		tip = s.tipHook()
	}
	number := head.Number.Uint64()
	s.mu.Lock()
	highest := s.highest
	s.highest = max(s.highest, number)
	s.mu.Unlock()
	if number < highest {
		return nil, fmt.Errorf("%w: the node's head %d is below block %d, which an earlier pass worked against; waiting for it to catch up",
			store.ErrNodeBehind, number, highest)
	}
	p := &pass{
		now:     s.cfg.Now().UTC().Truncate(time.Microsecond),
		number:  number,
		baseFee: new(big.Int),
		tip:     bigMax(tip, big.NewInt(1)),
		nonces:  map[common.Address]uint64{},
		pending: map[common.Address]uint64{},
		avail:   map[common.Address]*big.Int{},
	}
	if head.BaseFee != nil {
		p.baseFee.Set(head.BaseFee)
	}
	if s.cfg.Finality == store.FinalityTag {
		if p.finalized, p.hasFinalized, err = s.st.FinalizedBlock(ctx); err != nil {
			return nil, fmt.Errorf("sweep: read the finalized block: %w", err)
		}
	}
	return p, nil
}

func (p *pass) headNumber() *big.Int { return new(big.Int).SetUint64(p.number) }

// nonceAt returns the account's nonce at the pass's head (transactions
// mined up to it), read once per pass.
func (s *Sweeper) nonceAt(ctx context.Context, p *pass, addr common.Address) (uint64, error) {
	p.mu.Lock()
	n, ok := p.nonces[addr]
	p.mu.Unlock()
	if ok {
		return n, nil
	}
	n, err := s.chain.NonceAt(ctx, addr, p.headNumber())
	if err != nil {
		return 0, err
	}
	p.mu.Lock()
	p.nonces[addr] = n
	p.mu.Unlock()
	return n, nil
}

// pendingNonce returns the node's pending nonce of addr, read once per
// pass; ReserveNonce takes the larger of it and the stored next nonce.
func (s *Sweeper) pendingNonce(ctx context.Context, p *pass, addr common.Address) (uint64, error) {
	p.mu.Lock()
	n, ok := p.pending[addr]
	p.mu.Unlock()
	if ok {
		return n, nil
	}
	n, err := s.chain.PendingNonceAt(ctx, addr)
	if err != nil {
		return 0, err
	}
	p.mu.Lock()
	p.pending[addr] = n
	p.mu.Unlock()
	return n, nil
}

// reserveWallet takes amount from the sweep wallet's uncommitted balance
// for this pass. It reports false when the wallet cannot pay.
func (s *Sweeper) reserveWallet(ctx context.Context, p *pass, amount *big.Int) (bool, error) {
	return s.reserveFrom(ctx, p, s.keys.Wallet.Address(), amount)
}

// reserveFrom takes amount of native coin from addr's uncommitted balance
// for this pass: what it holds at the head less what its stored, unmined
// transactions can cost and what this pass already signed for. It
// reports false when the account cannot pay.
func (s *Sweeper) reserveFrom(ctx context.Context, p *pass, addr common.Address, amount *big.Int) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	avail, ok := p.avail[addr]
	if !ok {
		var err error
		if avail, err = s.uncommittedBalance(ctx, p, addr); err != nil {
			return false, err // read again by the next caller
		}
		p.avail[addr] = avail
	}
	if avail.Cmp(amount) < 0 {
		return false, nil
	}
	avail.Sub(avail, amount)
	return true, nil
}

// uncommittedBalance is addr's balance at the head minus the most its
// stored, unmined transactions can cost.
func (s *Sweeper) uncommittedBalance(ctx context.Context, p *pass, addr common.Address) (*big.Int, error) {
	bal, err := s.chain.BalanceAt(ctx, addr, p.headNumber())
	if err != nil {
		return nil, err
	}
	unmined, err := s.st.ListUnminedSweepTxs(ctx, addr)
	if err != nil {
		return nil, err
	}
	for _, t := range unmined {
		bal.Sub(bal, txMaxCost(t))
	}
	if bal.Sign() < 0 {
		bal.SetInt64(0)
	}
	return bal, nil
}

// txMaxCost is value + gas limit × fee cap.
func txMaxCost(t store.SweepTx) *big.Int {
	c := new(big.Int).Mul(new(big.Int).SetUint64(t.GasLimit), t.MaxFeeWei.Big())
	return c.Add(c, t.ValueWei.Big())
}

func bigMax(a, b *big.Int) *big.Int {
	if a == nil || a.Cmp(b) < 0 {
		return new(big.Int).Set(b)
	}
	return new(big.Int).Set(a)
}

func bigMin(a, b *big.Int) *big.Int {
	if a.Cmp(b) > 0 {
		return new(big.Int).Set(b)
	}
	return new(big.Int).Set(a)
}

func amountOf(x *big.Int) store.Amount {
	a, err := store.AmountFromBig(x)
	if err != nil {
		panic(fmt.Sprintf("sweep: amount out of range: %v", err)) // wei on an EVM chain fits in 256 bits
	}
	return a
}
