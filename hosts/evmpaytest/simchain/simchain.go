// Package simchain is go-ethereum's simulated backend
// (ethclient/simulated) for tests, with one race removed: its Commit,
// Fork and AdjustTime return only once the node's transaction pool has
// moved to the new head.
//
// The simulated backend seals a block and makes it the head, and the pool
// learns of the new head through an event it handles on a goroutine of
// its own: until that reset has run, the pool validates transactions
// against the state before the block. A wallet funded in the block just
// committed then has "insufficient funds for gas * price + value: balance
// 0", and after a Fork the pool still holds the abandoned branch's nonces
// ("nonce too low"). go-ethereum syncs the pool before it seals a block,
// not after; the simulated backend exposes no way to wait for the reset.
// So Backend watches the pool itself, through the node's own JSON-RPC
// (txpool_contentFrom, eth_getTransactionCount "pending"), for the sign
// that it has run, which is deterministic:
//
//   - a transaction of the new branch (a committed block's) leaves the pool
//     only in the reset: once none is there, the pool's state is the new
//     head's;
//   - after a reorg (Fork), the pool re-admits the abandoned branch's
//     transactions in the reset: once each sender's transactions are back,
//     or its pending nonce has fallen below them (the ones the new state
//     cannot pay for are refused), the reset has run.
//
// A block without transactions changes no balance or nonce the pool checks,
// so there is nothing to wait for. Nothing sleeps for a fixed time.
//
// Two more sources of flakes are removed: the miner's time budget for
// filling a block (2 s), which a loaded machine under the race detector
// can exceed, sealing a block without some of the pool's transactions;
// and the pool's promotion of a transaction it was just sent (from
// "queued" to "pending", on the pool's own goroutine), which a block
// sealed at once misses. Commit first waits until every executable
// transaction is pending, then seals them all.
//
// Use Backend wherever a test would use simulated.Backend (New in a test,
// NewBackend in an example): it embeds it, so Client and Rollback are
// go-ethereum's. The package imports nothing of evmpay, so that every
// package's own tests can use it; like the rest of the kit it is for tests
// (and `payd dev`'s chain), never for a chain that holds value.
package simchain

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/eth/ethconfig"
	"github.com/ethereum/go-ethereum/ethclient/simulated"
	"github.com/ethereum/go-ethereum/node"
	"github.com/ethereum/go-ethereum/rpc"
)

// ChainID is the simulated chain's EIP-155 chain id (go-ethereum's
// simulated backend always uses 1337).
const ChainID = 1337

// SyncTimeout bounds the wait for the pool's reset. It bounds a hung test
// and asserts nothing about speed: a reset takes milliseconds.
const SyncTimeout = 2 * time.Minute

// TB is the part of testing.TB that Backend uses.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// Backend is a simulated backend whose Commit, Fork and AdjustTime wait
// for the transaction pool's reset.
type Backend struct {
	*simulated.Backend

	tb     TB // nil: failures panic
	client simulated.Client
	ipc    string
	dir    string

	mu  sync.Mutex
	rpc *rpc.Client

	httpURL string
}

// New starts a simulated backend with alloc as its genesis accounts and
// go-ethereum's options (simulated.NewBackend), closed when the test ends;
// a pool that never resets fails the test. Its node serves JSON-RPC on a
// Unix socket (IPCPath), in a directory of its own unless an option sets
// node.Config.IPCPath.
func New(tb TB, alloc types.GenesisAlloc, options ...func(*node.Config, *ethconfig.Config)) *Backend {
	tb.Helper()
	b, err := newBackend(alloc, options...)
	if err != nil {
		tb.Fatalf("simchain: %v", err)
	}
	b.tb = tb
	tb.Cleanup(func() { _ = b.Close() })
	return b
}

// NewBackend is New without a test, for an example: the caller closes it,
// and a pool that never resets panics.
func NewBackend(alloc types.GenesisAlloc, options ...func(*node.Config, *ethconfig.Config)) *Backend {
	b, err := newBackend(alloc, options...)
	if err != nil {
		panic(err)
	}
	return b
}

func newBackend(alloc types.GenesisAlloc, options ...func(*node.Config, *ethconfig.Config)) (*Backend, error) {
	// Short: a socket's path has about 100 bytes.
	dir, err := os.MkdirTemp("", "simchain-")
	if err != nil {
		return nil, err
	}
	b := &Backend{dir: dir}
	opts := append([]func(*node.Config, *ethconfig.Config){func(nc *node.Config, ec *ethconfig.Config) {
		nc.IPCPath = filepath.Join(dir, "node.ipc")
		// The miner fills a block from the pool within a time budget
		// (Recommit, 2 s) and seals what it has when the budget runs out:
		// on a loaded machine, under the race detector, a Commit then
		// left some of the pool's transactions for the next block (and a
		// Fork after it failed with "pending block dirty"). A block holds
		// everything pending, however long that takes.
		ec.Miner.Recommit = time.Hour
	}}, options...)
	opts = append(opts, func(nc *node.Config, _ *ethconfig.Config) { b.ipc = nc.IPCPath })
	// A node serving HTTP binds its port while it starts, after the port
	// was chosen: another process can take it in between, so a port that
	// is taken by then is replaced by another.
	for attempt := 1; ; attempt++ {
		var (
			port   int
			picked bool
		)
		b.Backend, port, picked, err = start(alloc, opts)
		if err == nil {
			if port > 0 {
				b.httpURL = "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
			}
			break
		}
		if !picked || attempt == 5 {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	b.client = b.Backend.Client()
	return b, nil
}

// start starts the simulated backend and returns its HTTP port (0 without
// HTTP); a node whose HTTP port is -1 gets a free port from loopbackPort
// (picked). The backend panics when its node does not start: that is an
// error here.
func start(alloc types.GenesisAlloc, opts []func(*node.Config, *ethconfig.Config)) (sb *simulated.Backend, port int, picked bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("simchain: start the simulated node: %v", p)
		}
	}()
	opts = append(opts, func(nc *node.Config, _ *ethconfig.Config) {
		if nc.HTTPPort == -1 {
			picked = true
			if nc.HTTPPort, err = loopbackPort(); err != nil {
				panic(err)
			}
		}
		if nc.HTTPHost != "" {
			port = nc.HTTPPort
		}
	})
	return simulated.NewBackend(alloc, opts...), port, picked, nil
}

// WithChainID makes the simulated chain's EIP-155 chain id id instead of
// ChainID: two simulated chains that one database indexes side by side
// (store.Store.Chain) need two ids.
func WithChainID(id uint64) func(*node.Config, *ethconfig.Config) {
	return func(_ *node.Config, ec *ethconfig.Config) {
		cfg := *ec.Genesis.Config
		cfg.ChainID = new(big.Int).SetUint64(id)
		ec.Genesis.Config = &cfg
	}
}

// HTTP makes the node serve JSON-RPC over HTTP with the given modules (for
// example "eth", "net") on a free loopback port: the URL is HTTPURL.
func HTTP(modules ...string) func(*node.Config, *ethconfig.Config) {
	return func(nc *node.Config, _ *ethconfig.Config) {
		nc.HTTPHost = "127.0.0.1"
		nc.HTTPPort = -1 // start picks the port
		nc.HTTPModules = modules
	}
}

// HTTPURL is the node's JSON-RPC over HTTP, when started with the HTTP
// option ("" without it).
func (b *Backend) HTTPURL() string { return b.httpURL }

// loopbackPort returns a port on 127.0.0.1 that is free now and lies below
// Linux's ephemeral range (32768–60999). A port 0 listener gives a port
// from that range, which an outgoing connection's source port can take
// before the node binds it; below the range, only another server can.
func loopbackPort() (int, error) {
	for range 200 {
		p := 20000 + rand.IntN(12768)
		if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p))); err == nil {
			_ = l.Close()
			return p, nil
		}
	}
	return 0, fmt.Errorf("simchain: no free loopback port in 20000–32767")
}

// Close shuts the backend down (simulated.Backend.Close) and removes its
// socket's directory.
func (b *Backend) Close() error {
	b.mu.Lock()
	if b.rpc != nil {
		b.rpc.Close()
		b.rpc = nil
	}
	b.mu.Unlock()
	err := b.Backend.Close()
	_ = os.RemoveAll(b.dir)
	return err
}

// fail reports a failure to wait: to the test, or as a panic.
func (b *Backend) fail(format string, args ...any) {
	if b.tb == nil {
		panic(fmt.Sprintf(format, args...))
	}
	b.tb.Helper()
	b.tb.Errorf(format, args...)
}

// helper marks the caller as a test helper, when there is a test.
func (b *Backend) helper() {
	if b.tb != nil {
		b.tb.Helper()
	}
}

// IPCPath is the node's JSON-RPC socket.
func (b *Backend) IPCPath() string { return b.ipc }

// RPC is a raw JSON-RPC client of the node (over its socket), closed when
// the test ends.
func (b *Backend) RPC() (*rpc.Client, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.rpc == nil {
		c, err := rpc.DialIPC(context.Background(), b.ipc)
		if err != nil {
			return nil, fmt.Errorf("simchain: dial the simulated node: %w", err)
		}
		b.rpc = c
	}
	return b.rpc, nil
}

// Commit seals a block with the pool's transactions, makes it the head
// and returns its hash once the pool has reset to it.
func (b *Backend) Commit() common.Hash {
	b.helper()
	old := b.head()
	b.promoted()
	h := b.Backend.Commit()
	b.Sync(old, h)
	return h
}

// promoted waits until the pool has promoted every transaction it can
// execute: a transaction whose sender's nonces from the account's current
// one up to it are all in the pool is "pending", none left "queued". The
// pool promotes a transaction it was sent on a goroutine of its own, and a
// block sealed before that misses it (one of two transactions sent back to
// back was left out about once in 30 blocks under load, and a Fork after
// it failed with "pending block dirty"). Transactions behind a nonce gap
// stay queued and are not waited for.
func (b *Backend) promoted() {
	b.helper()
	r, err := b.RPC()
	if err != nil {
		b.fail("%v", err)
		return
	}
	ctx := context.Background()
	var seen string
	for deadline := time.Now().Add(SyncTimeout); ; time.Sleep(time.Millisecond) {
		var content map[string]map[common.Address]map[string]json.RawMessage
		if err := r.CallContext(ctx, &content, "txpool_content"); err != nil {
			b.fail("simchain: txpool_content: %v", err)
			return
		}
		seen = ""
		for from, queued := range content["queued"] {
			var next hexutil.Uint64
			if err := r.CallContext(ctx, &next, "eth_getTransactionCount", from, "latest"); err != nil {
				b.fail("simchain: eth_getTransactionCount: %v", err)
				return
			}
			n := uint64(next)
			for {
				if _, ok := content["pending"][from][strconv.FormatUint(n, 10)]; !ok {
					break
				}
				n++
			}
			if _, ok := queued[strconv.FormatUint(n, 10)]; ok {
				seen = fmt.Sprintf("%s's transaction with nonce %d is executable but still queued", from.Hex(), n)
				break
			}
		}
		if seen == "" {
			return
		}
		if time.Now().After(deadline) {
			b.fail("simchain: the transaction pool did not promote within %v: %s", SyncTimeout, seen)
			return
		}
	}
}

// Fork makes parent the head (simulated.Backend.Fork: the chain is
// rewound there, and the next Commit builds on it) and returns once the
// pool has reset to it: the abandoned branch's transactions are back in
// the pool (Rollback drops them) or refused.
func (b *Backend) Fork(parent common.Hash) error {
	b.helper()
	old := b.head()
	if err := b.Backend.Fork(parent); err != nil {
		return err
	}
	b.Sync(old, parent)
	return nil
}

// AdjustTime seals an empty block adjustment later than the head
// (simulated.Backend.AdjustTime) and returns once the pool has reset to
// it.
func (b *Backend) AdjustTime(adjustment time.Duration) error {
	b.helper()
	old := b.head()
	if err := b.Backend.AdjustTime(adjustment); err != nil {
		return err
	}
	b.Sync(old, b.head())
	return nil
}

func (b *Backend) head() common.Hash {
	b.helper()
	h, err := b.client.HeaderByNumber(context.Background(), nil)
	if err != nil {
		b.fail("simchain: head: %v", err)
		return common.Hash{}
	}
	return h.Hash()
}

// Sync waits until the transaction pool has reset from the head old to
// the head new (see the package's documentation for the sign it waits
// for). Commit, Fork and AdjustTime call it; a test that moves the head
// through the embedded simulated.Backend itself may call it too. It may
// run on any goroutine: a pool that never resets is reported with Errorf.
func (b *Backend) Sync(old, new common.Hash) {
	b.helper()
	if old == new || old == (common.Hash{}) {
		return
	}
	ctx := context.Background()
	included, discarded, err := b.branches(ctx, old, new)
	if err != nil {
		b.fail("simchain: sync the pool to %s: %v", new.Hex(), err)
		return
	}
	if len(included) == 0 && len(discarded) == 0 {
		return
	}
	r, err := b.RPC()
	if err != nil {
		b.fail("%v", err)
		return
	}
	var seen string
	for deadline := time.Now().Add(SyncTimeout); ; time.Sleep(time.Millisecond) {
		var done bool
		done, seen, err = poolReset(ctx, r, included, discarded)
		if err != nil {
			b.fail("simchain: sync the pool to %s: %v", new.Hex(), err)
			return
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			b.fail("simchain: the transaction pool did not reset to %s within %v: %s", new.Hex(), SyncTimeout, seen)
			return
		}
	}
}

// poolTx is a transaction of a branch: its hash, sender and nonce.
type poolTx struct {
	hash  common.Hash
	from  common.Address
	nonce uint64
}

// branches reads the transactions of the blocks between the common
// ancestor of old and new and each of them: those of the new branch
// (included), and those of the old branch the new one does not hold
// (discarded).
func (b *Backend) branches(ctx context.Context, old, new common.Hash) (included, discarded []poolTx, err error) {
	id, err := b.client.ChainID(ctx)
	if err != nil {
		return nil, nil, err
	}
	signer := types.LatestSignerForChainID(id)
	var oldTxs, newTxs []*types.Transaction
	ob, err := b.client.BlockByHash(ctx, old)
	if err != nil {
		return nil, nil, fmt.Errorf("block %s: %w", old.Hex(), err)
	}
	nb, err := b.client.BlockByHash(ctx, new)
	if err != nil {
		return nil, nil, fmt.Errorf("block %s: %w", new.Hex(), err)
	}
	parent := func(blk *types.Block) (*types.Block, error) {
		p, err := b.client.BlockByHash(ctx, blk.ParentHash())
		if err != nil {
			return nil, fmt.Errorf("block %s: %w", blk.ParentHash().Hex(), err)
		}
		return p, nil
	}
	for ob.Hash() != nb.Hash() {
		if ob.NumberU64() >= nb.NumberU64() {
			oldTxs = append(oldTxs, ob.Transactions()...)
			if ob, err = parent(ob); err != nil {
				return nil, nil, err
			}
		} else {
			newTxs = append(newTxs, nb.Transactions()...)
			if nb, err = parent(nb); err != nil {
				return nil, nil, err
			}
		}
	}
	in := map[common.Hash]bool{}
	read := func(txs []*types.Transaction, skip map[common.Hash]bool) ([]poolTx, error) {
		var out []poolTx
		for _, tx := range txs {
			if skip[tx.Hash()] {
				continue
			}
			from, err := types.Sender(signer, tx)
			if err != nil {
				return nil, err
			}
			out = append(out, poolTx{hash: tx.Hash(), from: from, nonce: tx.Nonce()})
		}
		return out, nil
	}
	if included, err = read(newTxs, nil); err != nil {
		return nil, nil, err
	}
	for _, tx := range included {
		in[tx.hash] = true
	}
	if discarded, err = read(oldTxs, in); err != nil {
		return nil, nil, err
	}
	return included, discarded, nil
}

// poolReset reports whether the pool has run its reset to the new head:
// no transaction of the new branch is still in it, and every sender of a
// discarded transaction has them all back in the pool or a pending nonce
// at or below the highest of them.
func poolReset(ctx context.Context, r *rpc.Client, included, discarded []poolTx) (bool, string, error) {
	contents := map[common.Address]map[common.Hash]bool{}
	content := func(a common.Address) (map[common.Hash]bool, error) {
		if c, ok := contents[a]; ok {
			return c, nil
		}
		var res map[string]map[string]struct {
			Hash common.Hash `json:"hash"`
		}
		if err := r.CallContext(ctx, &res, "txpool_contentFrom", a); err != nil {
			return nil, fmt.Errorf("txpool_contentFrom: %w", err)
		}
		c := map[common.Hash]bool{}
		for _, byNonce := range res { // "pending" and "queued"
			for _, tx := range byNonce {
				c[tx.Hash] = true
			}
		}
		contents[a] = c
		return c, nil
	}
	for _, tx := range included {
		c, err := content(tx.from)
		if err != nil {
			return false, "", err
		}
		if c[tx.hash] {
			return false, fmt.Sprintf("the mined transaction %s is still in the pool", tx.hash.Hex()), nil
		}
	}
	bySender := map[common.Address][]poolTx{}
	for _, tx := range discarded {
		bySender[tx.from] = append(bySender[tx.from], tx)
	}
	var waiting []string
	for from, txs := range bySender {
		c, err := content(from)
		if err != nil {
			return false, "", err
		}
		back, highest := true, uint64(0)
		for _, tx := range txs {
			back = back && c[tx.hash]
			highest = max(highest, tx.nonce)
		}
		if back {
			continue
		}
		var pending hexutil.Uint64
		if err := r.CallContext(ctx, &pending, "eth_getTransactionCount", from, "pending"); err != nil {
			return false, "", fmt.Errorf("eth_getTransactionCount: %w", err)
		}
		if uint64(pending) <= highest {
			continue
		}
		waiting = append(waiting, fmt.Sprintf("%s (pending nonce %d, its abandoned transactions up to nonce %d not back)",
			from.Hex(), pending, highest))
	}
	if len(waiting) > 0 {
		return false, "the pool still has the abandoned branch's nonces for " + strings.Join(waiting, ", "), nil
	}
	return true, "", nil
}
