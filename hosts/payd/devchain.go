package main

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"net"
	"strconv"
	"time"

	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/eth/ethconfig"
	"github.com/ethereum/go-ethereum/ethclient/simulated"
	"github.com/ethereum/go-ethereum/node"

	"github.com/evmpay/evmpay/hdwallet"
	"github.com/evmpay/evmpay/store/testtoken"
)

// devMnemonic is the well-known development mnemonic (Hardhat, Anvil, …).
// Its accounts are funded on the dev chain; it is public — never use it on a
// real chain.
const devMnemonic = "test test test test test test test test test test test junk"

// devAccounts is how many accounts of devMnemonic the dev chain funds.
const devAccounts = 10

// devChainID is the simulated backend's fixed chain id.
const devChainID = 1337

// devFunds is each funded account's balance: 10,000 coins.
var devFunds = new(big.Int).Mul(big.NewInt(10_000), big.NewInt(1e18))

// devChain is an in-process go-ethereum dev chain serving JSON-RPC over HTTP
// and sealing a block every period.
type devChain struct {
	backend *simulated.Backend
	url     string
	period  time.Duration
}

// devWallet returns the wallet of the well-known development mnemonic.
func devWallet() (*hdwallet.Wallet, error) {
	m, err := hdwallet.ParseMnemonic(devMnemonic)
	if err != nil {
		return nil, err
	}
	return hdwallet.NewWallet(m, "")
}

// startDevChain starts the chain with devMnemonic's first accounts and the
// extra addresses funded, serving JSON-RPC on addr (host:port).
func startDevChain(addr string, period time.Duration, extra []common.Address) (*devChain, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--chain-rpc %q: want host:port: %w", addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("--chain-rpc %q: bad port", addr)
	}
	if port == 0 {
		// The node needs a concrete port: pick a free one.
		if port, err = freePort(host); err != nil {
			return nil, err
		}
	} else if l, err := net.Listen("tcp", net.JoinHostPort(host, portStr)); err != nil {
		return nil, fmt.Errorf("dev chain: cannot listen on %s (is another node or payd running? choose another port with --chain-rpc): %w", addr, err)
	} else {
		l.Close()
	}
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
	backend, err := newSimulatedBackend(alloc, func(nc *node.Config, ec *ethconfig.Config) {
		nc.HTTPHost = host
		nc.HTTPPort = port
		nc.HTTPModules = []string{"eth", "net", "web3"}
		nc.HTTPVirtualHosts = []string{"*"}
		nc.HTTPCors = []string{"*"}
	})
	if err != nil {
		return nil, err
	}
	c := &devChain{
		backend: backend,
		url:     "http://" + net.JoinHostPort(host, strconv.Itoa(port)),
		period:  period,
	}
	return c, nil
}

// newSimulatedBackend turns the simulated backend's panics (a port already
// taken) into errors.
func newSimulatedBackend(alloc types.GenesisAlloc, opt func(*node.Config, *ethconfig.Config)) (b *simulated.Backend, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("dev chain: %v", p)
		}
	}()
	return simulated.NewBackend(alloc, opt), nil
}

// Run seals a block every period until ctx is cancelled, then closes the
// chain.
func (c *devChain) Run(ctx context.Context) error {
	t := time.NewTicker(c.period)
	defer t.Stop()
	defer c.backend.Close()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			c.backend.Commit()
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

func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
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
	opts := bind.NewKeyedTransactor(key, big.NewInt(devChainID))
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
