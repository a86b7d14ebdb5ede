package evmpaytest

import (
	"cmp"
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient/simulated"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/evmpay/evmpay/hdwallet"
	"github.com/evmpay/evmpay/hosts/evmpaytest/simchain"
	"github.com/evmpay/evmpay/hosts/evmpaytest/testtoken"
	"github.com/evmpay/evmpay/hosts/evmpaytest/wait"
	"github.com/evmpay/evmpay/indexer"
	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/sweep"
)

// The simulated client is every chain client the packages consume: no
// adapter between the kit and them.
var (
	_ sweep.Chain          = simulated.Client(nil)
	_ invoice.CodeReader   = simulated.Client(nil)
	_ indexer.Client       = simulated.Client(nil)
	_ bind.ContractBackend = simulated.Client(nil)
)

// ChainID is the simulated chain's EIP-155 chain id (go-ethereum's
// simulated backend always uses 1337).
const ChainID = 1337

// TestMnemonic is the well-known development mnemonic whose first accounts
// Chain funds (the same accounts as `payd dev`, Hardhat and Anvil: account
// 0 is 0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266). Never send real funds
// to them.
const TestMnemonic = "test test test test test test test test test test test junk"

// Account is a funded account of the simulated chain.
type Account struct {
	// Address is the account's address.
	Address common.Address
	// Key is its private key, for signing transactions of the test's own.
	Key *ecdsa.PrivateKey
}

// ChainConfig configures NewChain. The zero value is usable.
type ChainConfig struct {
	// Accounts is how many accounts of TestMnemonic (m/44'/60'/0'/0/i)
	// the genesis block funds. Defaults to 3.
	Accounts int
	// Balance is each funded account's balance in wei. Defaults to
	// 1,000,000 coins (10^24 wei).
	Balance *big.Int
	// Fund are more addresses the genesis block gives Balance (a sweep
	// wallet, a gas funder). Defaults to none.
	Fund []common.Address
	// ChainID is the chain's EIP-155 id: two kits' chains that one store
	// holds side by side (store.Store.Chain) need two. Defaults to
	// ChainID (1337).
	ChainID uint64
}

// defaultBalance is 1,000,000 coins.
var defaultBalance = new(big.Int).Exp(big.NewInt(10), big.NewInt(24), nil)

// Chain is go-ethereum's simulated backend — a real EVM in the process —
// with funded accounts. Blocks are sealed only when the test says so
// (Mine, and Pay, which mines the payment's block). Its methods fail the
// test on error: call them from the test's goroutine.
type Chain struct {
	tb       reporter
	id       *big.Int // the EIP-155 chain id
	backend  *simchain.Backend
	client   simulated.Client
	accounts []Account

	// closers are StartChain's clean-ups, run by Close.
	closers *panicker

	mu     sync.Mutex // serializes sends and seals
	source *indexer.ClientSource
}

// NewChain starts a simulated chain that is closed when the test ends.
func NewChain(tb testing.TB, cfg ChainConfig) *Chain {
	tb.Helper()
	return newChain(tb, cfg)
}

// reporter is the part of testing.TB the Chain uses; StartChain's
// (outside a test) panics instead of failing a test.
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// StartChain starts a simulated chain outside a test — a demo program, an
// example — with the funded accounts and helpers of NewChain. Its methods
// panic where NewChain's would fail the test. Close stops it.
func StartChain(cfg ChainConfig) (c *Chain, err error) {
	defer func() {
		if r := recover(); r != nil {
			c, err = nil, fmt.Errorf("%v", r)
		}
	}()
	p := &panicker{}
	c = newChain(p, cfg)
	c.closers = p
	return c, nil
}

// Close stops a chain started with StartChain (NewChain's stops when its
// test ends).
func (c *Chain) Close() error {
	if c.closers != nil {
		c.closers.run()
	}
	return nil
}

// panicker is a reporter outside tests: failures panic, clean-ups run at
// Close.
type panicker struct {
	mu  sync.Mutex
	fns []func()
}

func (p *panicker) Helper()                           {}
func (p *panicker) Errorf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (p *panicker) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (p *panicker) Cleanup(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fns = append(p.fns, f)
}

func (p *panicker) run() {
	p.mu.Lock()
	fns := p.fns
	p.fns = nil
	p.mu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
}

func newChain(tb reporter, cfg ChainConfig) *Chain {
	n := cfg.Accounts
	if n == 0 {
		n = 3
	}
	balance := cfg.Balance
	if balance == nil {
		balance = defaultBalance
	}
	m, err := hdwallet.ParseMnemonic(TestMnemonic)
	if err != nil {
		tb.Fatalf("evmpaytest: %v", err)
	}
	w, err := hdwallet.NewWallet(m, "")
	if err != nil {
		tb.Fatalf("evmpaytest: %v", err)
	}
	c := &Chain{tb: tb, id: new(big.Int).SetUint64(cmp.Or(cfg.ChainID, ChainID))}
	alloc := types.GenesisAlloc{}
	for i := range n {
		key, err := w.PrivateKey(uint32(i))
		if err != nil {
			tb.Fatalf("evmpaytest: account %d: %v", i, err)
		}
		a := Account{Address: crypto.PubkeyToAddress(key.PublicKey), Key: key}
		c.accounts = append(c.accounts, a)
		alloc[a.Address] = types.Account{Balance: new(big.Int).Set(balance)}
	}
	for _, a := range cfg.Fund {
		alloc[a] = types.Account{Balance: new(big.Int).Set(balance)}
	}
	// simchain: blocks sealed by the kit return once the node's
	// transaction pool has moved to them, and the node serves its JSON-RPC
	// on a Unix socket, for RPC.
	c.backend = simchain.New(tb, alloc, simchain.WithChainID(c.id.Uint64()))
	c.client = c.backend.Client()
	return c
}

// ID is the chain's EIP-155 chain id (ChainConfig.ChainID).
func (c *Chain) ID() uint64 { return c.id.Uint64() }

// Client is the chain's client: go-ethereum's simulated.Client, which
// satisfies every chain interface evmpay's packages consume
// (sweep.Chain, invoice.CodeReader, indexer.Client, bind.ContractBackend).
func (c *Chain) Client() simulated.Client { return c.client }

// Source is the indexer's view of the chain (indexer.NewClientSource on
// Client).
func (c *Chain) Source() *indexer.ClientSource {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.source == nil {
		c.source = indexer.NewClientSource(c.client)
	}
	return c.source
}

// RPC is a raw JSON-RPC client of the chain's node (over a Unix socket),
// for code that speaks JSON-RPC itself: indexer.NewRPCSource, a proxy. It
// is closed when the test ends.
func (c *Chain) RPC() *rpc.Client {
	c.tb.Helper()
	r, err := c.backend.RPC()
	if err != nil {
		c.tb.Fatalf("evmpaytest: %v", err)
	}
	return r
}

// Backend is the simulated backend itself, for what the kit does not wrap
// (Fork to make a reorg, AdjustTime). It is go-ethereum's
// simulated.Backend (embedded) whose Commit, Fork and AdjustTime return
// once the node's transaction pool has moved to the new head
// (hosts/evmpaytest/simchain): a transaction sent right after them is
// checked against the new head's balances and nonces.
func (c *Chain) Backend() *simchain.Backend { return c.backend }

// Accounts are the funded accounts, in TestMnemonic's order.
func (c *Chain) Accounts() []Account { return c.accounts }

// Head is the number of the chain's latest block.
func (c *Chain) Head() uint64 {
	c.tb.Helper()
	n, err := c.client.BlockNumber(context.Background())
	if err != nil {
		c.tb.Fatalf("evmpaytest: head: %v", err)
	}
	return n
}

// Mine seals n blocks, with whatever transactions the pool holds, and
// returns the new head's number.
func (c *Chain) Mine(n int) uint64 {
	c.tb.Helper()
	c.mu.Lock()
	for range n {
		c.backend.Commit()
	}
	c.mu.Unlock()
	return c.Head()
}

// Balance is holder's balance of token (an ERC-20 contract), or of the
// native coin when token is nil (as store.Asset.Token returns it), in base
// units.
func (c *Chain) Balance(token *common.Address, holder common.Address) *big.Int {
	c.tb.Helper()
	ctx := context.Background()
	var (
		b   *big.Int
		err error
	)
	if token == nil {
		b, err = c.client.BalanceAt(ctx, holder, nil)
	} else {
		b, err = testtoken.Bind(testtoken.Stable, *token, c.client, "", "", 0).BalanceOf(ctx, holder)
	}
	if err != nil {
		c.tb.Fatalf("evmpaytest: balance of %s: %v", holder, err)
	}
	return b
}

// DeployToken deploys a test stablecoin (testtoken.Stable: EIP-2612
// permit) from the first account, mints 1,000,000 whole tokens to every
// funded account, and mines the blocks.
func (c *Chain) DeployToken(symbol string, decimals uint8) *testtoken.Token {
	c.tb.Helper()
	deployer := c.accounts[0]
	opts := bind.NewKeyedTransactor(deployer.Key, c.id)
	c.mu.Lock()
	tok, _, err := testtoken.Deploy(opts, c.client, testtoken.Stable, "Test "+symbol, symbol, decimals)
	if err == nil {
		c.backend.Commit()
		supply := new(big.Int).Mul(big.NewInt(1_000_000), new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(decimals)), nil))
		holders := make([]common.Address, len(c.accounts))
		for i, a := range c.accounts {
			holders[i] = a.Address
		}
		_, err = tok.MintBatch(opts, holders, supply)
		c.backend.Commit()
	}
	c.mu.Unlock()
	if err != nil {
		c.tb.Fatalf("evmpaytest: deploy token %s: %v", symbol, err)
	}
	return tok
}

// Pay pays an EIP-681 payment request from the first funded account: see
// PayFrom.
func (c *Chain) Pay(uri string) *types.Receipt {
	c.tb.Helper()
	return c.PayFrom(c.accounts[0], uri)
}

// PayFrom pays an EIP-681 payment request as evmpay writes them — native
// (ethereum:<address>@<chain id>?value=<wei>) or an ERC-20 transfer
// (ethereum:<token>@<chain id>/transfer?address=<to>&uint256=<amount>) —
// from a funded account, mines the block that holds it and returns its
// receipt. The test fails when the URI does not parse, names another chain
// or no amount, or the transaction fails.
func (c *Chain) PayFrom(from Account, uri string) *types.Receipt {
	c.tb.Helper()
	to, value, data, err := parsePayment(uri, c.ID())
	if err != nil {
		c.tb.Fatalf("evmpaytest: pay %s: %v", uri, err)
	}
	ctx := context.Background()
	c.mu.Lock()
	tx, err := c.send(ctx, from, to, value, data)
	if err == nil {
		c.backend.Commit()
	}
	c.mu.Unlock()
	if err != nil {
		c.tb.Fatalf("evmpaytest: pay %s: %v", uri, err)
	}
	var receipt *types.Receipt
	wait.Until(c.tb, "the receipt of payment "+tx.Hash().Hex(), func() (bool, any) {
		receipt, err = c.client.TransactionReceipt(ctx, tx.Hash())
		return err == nil, err
	})
	if receipt.Status != types.ReceiptStatusSuccessful {
		c.tb.Fatalf("evmpaytest: pay %s: transaction %s failed in block %s", uri, tx.Hash().Hex(), receipt.BlockNumber)
	}
	return receipt
}

// parsePayment reads a native or ERC-20 transfer payment URI into the
// transaction it asks for.
func parsePayment(uri string, chainID uint64) (to common.Address, value *big.Int, data []byte, err error) {
	if strings.Contains(uri, "/transfer") {
		t, err := invoice.ParseTransferURI(uri)
		if err != nil {
			return to, nil, nil, err
		}
		if t.ChainID != chainID {
			return to, nil, nil, fmt.Errorf("the URI asks for chain %d, the simulated chain is %d", t.ChainID, chainID)
		}
		if t.Amount == nil || t.Amount.IsZero() {
			return to, nil, nil, errors.New("the URI names no amount")
		}
		data, err = testtoken.Stable.ABI.Pack("transfer", t.To, t.Amount.ToBig())
		return t.Token, new(big.Int), data, err
	}
	p, err := invoice.ParsePaymentURI(uri)
	if err != nil {
		return to, nil, nil, err
	}
	if p.ChainID != chainID {
		return to, nil, nil, fmt.Errorf("the URI asks for chain %d, the simulated chain is %d", p.ChainID, chainID)
	}
	if p.Value == nil || p.Value.IsZero() {
		return to, nil, nil, errors.New("the URI names no amount")
	}
	return p.Address, p.Value.ToBig(), nil, nil
}

// send signs and sends an EIP-1559 transaction from `from` and waits until
// the pool holds it as pending (the pool admits transactions in the
// background: a seal before that would leave it out). Called with c.mu
// held.
func (c *Chain) send(ctx context.Context, from Account, to common.Address, value *big.Int, data []byte) (*types.Transaction, error) {
	nonce, err := c.client.PendingNonceAt(ctx, from.Address)
	if err != nil {
		return nil, fmt.Errorf("nonce: %w", err)
	}
	tip, err := c.client.SuggestGasTipCap(ctx)
	if err != nil {
		return nil, fmt.Errorf("gas tip: %w", err)
	}
	head, err := c.client.HeaderByNumber(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("head: %w", err)
	}
	feeCap := new(big.Int).Set(tip)
	if head.BaseFee != nil {
		feeCap.Add(feeCap, new(big.Int).Mul(head.BaseFee, big.NewInt(2)))
	}
	gas, err := c.client.EstimateGas(ctx, ethereum.CallMsg{From: from.Address, To: &to, Value: value, Data: data})
	if err != nil {
		return nil, fmt.Errorf("the payment would fail (does %s hold the funds?): %w", from.Address, err)
	}
	tx, err := types.SignNewTx(from.Key, types.LatestSignerForChainID(c.id), &types.DynamicFeeTx{
		ChainID: c.id, Nonce: nonce, GasTipCap: tip, GasFeeCap: feeCap,
		Gas: gas, To: &to, Value: value, Data: data,
	})
	if err != nil {
		return nil, err
	}
	if err := c.client.SendTransaction(ctx, tx); err != nil {
		return nil, fmt.Errorf("send: %w", err)
	}
	for deadline := time.Now().Add(wait.DefaultTimeout); ; time.Sleep(wait.DefaultInterval) {
		next, err := c.client.PendingNonceAt(ctx, from.Address)
		if err == nil && next > nonce {
			return tx, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("transaction %s never pending in the pool (last error: %v)", tx.Hash().Hex(), err)
		}
	}
}
