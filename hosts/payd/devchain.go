//go:build !nodev

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/eth/ethconfig"
	"github.com/ethereum/go-ethereum/node"

	"github.com/evmpay/evmpay/hosts/evmpaytest/simchain"
	"github.com/evmpay/evmpay/hosts/evmpaytest/testtoken"
)

// devChainID is the dev chain's chain id unless `payd devchain --chain-id`
// names another (a second dev chain beside the first, for a deployment
// of several chains).
const devChainID = 1337

// devFunds is each funded account's balance: 10,000 coins.
var devFunds = new(big.Int).Mul(big.NewInt(10_000), big.NewInt(1e18))

// devChain is an in-process go-ethereum dev chain serving JSON-RPC over HTTP
// and sealing a block every period.
//
// go-ethereum's own HTTP server listens on a private loopback port; the dev
// chain's address forwards to it, turning "transaction indexing is in
// progress" answers into null (see nullWhileIndexing).
type devChain struct {
	backend *simchain.Backend
	url     string
	period  time.Duration
	srv     *http.Server
	// mu makes a seal and a test's rewind of the chain take turns.
	mu sync.Mutex
}

// startDevChain starts the chain with devMnemonic's first accounts and the
// extra addresses funded, serving JSON-RPC on addr (host:port); chain
// id devChainID unless opts set another (simchain.WithChainID).
func startDevChain(addr string, period time.Duration, extra []common.Address, opts ...func(*node.Config, *ethconfig.Config)) (*devChain, error) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("--chain-rpc %q: want host:port: %w", addr, err)
	}
	// Bound first, so that a taken port fails at once.
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dev chain: cannot listen on %s (is another node or payd running? choose another port with --chain-rpc): %w", addr, err)
	}
	ok := false
	defer func() {
		if !ok {
			ln.Close()
		}
	}()
	w, err := devWallet()
	if err != nil {
		return nil, err
	}
	alloc := types.GenesisAlloc{}
	for i := uint32(0); i < devAccounts; i++ {
		a, err := w.Address(i)
		if err != nil {
			return nil, err
		}
		alloc[a] = types.Account{Balance: devFunds}
	}
	for _, a := range extra {
		alloc[a] = types.Account{Balance: devFunds}
	}
	// simchain: its node listens on a loopback port of its own, behind ln
	// (picked below the ephemeral range, and another one if it was taken
	// meanwhile), and its Commit seals every transaction the pool can
	// execute (go-ethereum's own may seal before the pool has promoted
	// the last one sent: a mint missing from the block after the deploy).
	backend, err := newSimulatedBackend(alloc, append([]func(*node.Config, *ethconfig.Config){simchain.HTTP("eth", "net", "web3"), func(nc *node.Config, _ *ethconfig.Config) {
		nc.HTTPVirtualHosts = []string{"*"}
		nc.HTTPCors = []string{"*"}
	}}, opts...)...)
	if err != nil {
		return nil, err
	}
	inner, err := url.Parse(backend.HTTPURL())
	if err != nil {
		backend.Close()
		return nil, err
	}
	c := &devChain{
		backend: backend,
		url:     "http://" + ln.Addr().String(),
		period:  period,
	}
	fwd := httputil.NewSingleHostReverseProxy(inner)
	fwd.ErrorLog = log.New(io.Discard, "", 0) // a client that hangs up is no news
	fwd.ModifyResponse = nullWhileIndexing
	director := fwd.Director
	fwd.Director = func(r *http.Request) {
		director(r)
		r.Header.Del("Accept-Encoding") // plain bytes, for nullWhileIndexing
	}
	c.srv = &http.Server{Handler: fwd, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = c.srv.Serve(ln) }()
	ok = true
	return c, nil
}

// errIndexing is go-ethereum's answer to a transaction or receipt lookup
// while its transaction indexer reports blocks remaining.
const errIndexing = "transaction indexing is in progress"

// nullWhileIndexing turns the node's -32000 "transaction indexing is in
// progress" answers into null results. On the dev chain the indexer is
// behind only until its first run (no index tail before block 1 is sealed
// and indexed; seal waits for it after every block), when no transaction
// can be unknown to the index but mined: null, "not mined yet", is what a
// wallet polling its receipt must see, not an error.
func nullWhileIndexing(resp *http.Response) error {
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if bytes.Contains(body, []byte(errIndexing)) {
		body = rewriteIndexing(body)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
	return nil
}

// rewriteIndexing replaces each errIndexing error object of a JSON-RPC
// response (single or batch) by a null result.
func rewriteIndexing(body []byte) []byte {
	fix := func(m map[string]json.RawMessage) {
		var e struct {
			Message string `json:"message"`
		}
		if raw, ok := m["error"]; ok && json.Unmarshal(raw, &e) == nil && e.Message == errIndexing {
			delete(m, "error")
			m["result"] = json.RawMessage("null")
		}
	}
	var one map[string]json.RawMessage
	if json.Unmarshal(body, &one) == nil {
		fix(one)
		if b, err := json.Marshal(one); err == nil {
			return b
		}
		return body
	}
	var batch []map[string]json.RawMessage
	if json.Unmarshal(body, &batch) == nil {
		for _, m := range batch {
			fix(m)
		}
		if b, err := json.Marshal(batch); err == nil {
			return b
		}
	}
	return body
}

// syncProgress is the part of ethclient.Client behind the simulated
// backend's client that seal needs.
type syncProgress interface {
	SyncProgress(context.Context) (*ethereum.SyncProgress, error)
}

// seal seals a block and returns once go-ethereum's background
// transaction indexer has caught up with it (eth_syncing reports done), so
// that a receipt lookup never meets an indexer behind the head.
func (c *devChain) seal(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.backend.Commit()
	sp, ok := c.backend.Client().(syncProgress)
	if !ok {
		return errors.New("dev chain: the simulated client does not answer eth_syncing")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		p, err := sp.SyncProgress(ctx)
		if err != nil {
			return fmt.Errorf("dev chain: eth_syncing: %w", err)
		}
		if p == nil || p.Done() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("dev chain: transaction indexer still %d blocks behind: %w", p.TxIndexRemainingBlocks, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

// newSimulatedBackend turns the simulated backend's panics (a node that
// cannot start) into errors.
func newSimulatedBackend(alloc types.GenesisAlloc, opts ...func(*node.Config, *ethconfig.Config)) (b *simchain.Backend, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("dev chain: %v", p)
		}
	}()
	return simchain.NewBackend(alloc, opts...), nil
}

// Run seals a block every period until ctx is cancelled, then closes the
// chain.
func (c *devChain) Run(ctx context.Context) error {
	t := time.NewTicker(c.period)
	defer t.Stop()
	defer c.backend.Close()
	defer c.srv.Close()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := c.seal(ctx); err != nil && ctx.Err() == nil {
				return err
			}
		}
	}
}

// ChainID returns the chain's id.
func (c *devChain) ChainID(ctx context.Context) (uint64, error) {
	id, err := c.backend.Client().ChainID(ctx)
	if err != nil {
		return 0, err
	}
	if !id.IsUint64() {
		return 0, errors.New("dev chain: chain id out of range")
	}
	return id.Uint64(), nil
}

// devTokenMint is what `payd dev` mints to each funded dev account:
// 1,000,000 USDC of 6 decimals.
var devTokenMint = big.NewInt(1_000_000_000_000)

// deployDevToken deploys the test stablecoin (StableToken: USDC, 6
// decimals, EIP-2612 permit) from dev account 0, mints devTokenMint to each
// funded dev account, and seals the blocks. Call it before Run.
func (c *devChain) deployDevToken(ctx context.Context) (*testtoken.Token, error) {
	w, err := devWallet()
	if err != nil {
		return nil, err
	}
	key, err := w.PrivateKey(0)
	if err != nil {
		return nil, err
	}
	client := c.backend.Client()
	id, err := client.ChainID(ctx)
	if err != nil {
		return nil, err
	}
	opts := bind.NewKeyedTransactor(key, id)
	opts.Context = ctx
	nonce, err := client.PendingNonceAt(ctx, opts.From)
	if err != nil {
		return nil, err
	}
	opts.Nonce = new(big.Int).SetUint64(nonce)
	tok, _, err := testtoken.DeployStable(opts, client)
	if err != nil {
		return nil, fmt.Errorf("dev chain: deploy the test stablecoin: %w", err)
	}
	c.backend.Commit()
	for i := uint32(0); i < devAccounts; i++ {
		to, err := w.Address(i)
		if err != nil {
			return nil, err
		}
		opts.Nonce = new(big.Int).SetUint64(nonce + 1 + uint64(i))
		if _, err := tok.Mint(opts, to, devTokenMint); err != nil {
			return nil, fmt.Errorf("dev chain: mint the test stablecoin: %w", err)
		}
	}
	c.backend.Commit()
	bal, err := tok.BalanceOf(ctx, opts.From)
	if err != nil || bal.Cmp(devTokenMint) != 0 {
		return nil, fmt.Errorf("dev chain: the test stablecoin was not minted (balance %v): %w", bal, err)
	}
	return tok, nil
}

// runDevChain runs the dev chain alone, for `payd serve` to use.
func runDevChain(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("devchain")
	addr := fs.String("chain-rpc", "127.0.0.1:8545", "JSON-RPC listen address")
	period := fs.Duration("block-time", 1200*time.Millisecond, "time between blocks")
	fund := fs.String("fund", "", "comma-separated extra addresses to fund (e.g. the gas funder)")
	chainID := fs.Uint64("chain-id", devChainID, "the chain's id (another than 1337 for a second dev chain)")
	log, err := parseLogged(fs, args, stdout)
	if err != nil {
		return err
	}
	var extra []common.Address
	for _, s := range strings.Split(*fund, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if !common.IsHexAddress(s) {
			return usageError(fmt.Sprintf("payd devchain: --fund %q is not an address", s))
		}
		extra = append(extra, common.HexToAddress(s))
	}
	if *chainID == 0 {
		return usageError("payd devchain: --chain-id must be positive")
	}
	chain, err := startDevChain(*addr, *period, extra, simchain.WithChainID(*chainID))
	if err != nil {
		return err
	}
	id, err := chain.ChainID(ctx)
	if err != nil {
		return err
	}
	log.Info("dev chain running", "rpc", chain.url, "chain_id", id, "block_time", period.String(),
		"funded_accounts", devAccounts+len(extra), "mnemonic", "test test … junk (public, dev only)")
	return chain.Run(ctx)
}
