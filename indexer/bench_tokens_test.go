package indexer_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"math/big"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/consensus/beacon"
	"github.com/ethereum/go-ethereum/consensus/ethash"
	"github.com/ethereum/go-ethereum/core"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/eth"
	"github.com/ethereum/go-ethereum/eth/ethconfig"
	"github.com/ethereum/go-ethereum/eth/filters"
	"github.com/ethereum/go-ethereum/node"
	"github.com/ethereum/go-ethereum/p2p"
	"github.com/ethereum/go-ethereum/params"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/evmpay/evmpay/hosts/evmpaytest/testtoken"
	"github.com/evmpay/evmpay/hosts/evmpaytest/wait"
	"github.com/evmpay/evmpay/indexer"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
)

var (
	benchTransferBlocks = flag.Int("transfers.blocks", 60, "blocks of Transfer logs in the token benchmark chain")
	benchTransfersPer   = flag.Int("transfers.per-block", 1000, "Transfer logs per block (mintBatch transactions of 100)")
)

// tokenChain is a chain whose blocks each hold StableToken mintBatch
// transactions emitting many Transfer logs, served by an in-process
// go-ethereum node.
type tokenChain struct {
	rpc       *rpc.Client
	blocks    uint64
	token     common.Address
	transfers int
}

var (
	tokenChainOnce sync.Once
	tokenChainNode *tokenChain
	tokenChainErr  error
)

func newTokenChain(blocks, per int) (*tokenChain, error) {
	key, _ := crypto.GenerateKey()
	from := crypto.PubkeyToAddress(key.PublicKey)
	funds, _ := new(big.Int).SetString("1000000000000000000000000000", 10)
	alloc := core.SystemContractAllocs()
	maps.Copy(alloc, types.GenesisAlloc{from: {Balance: funds}})
	cfg := *params.AllDevChainProtocolChanges
	genesis := &core.Genesis{Config: &cfg, GasLimit: 200_000_000, Alloc: alloc, Difficulty: big.NewInt(0),
		BaseFee: big.NewInt(params.InitialBaseFee)}
	signer := types.LatestSigner(&cfg)
	token := crypto.CreateAddress(from, 0)
	ctor, err := testtoken.Stable.ABI.Pack("", "Bench USD", "BUSD", uint8(6))
	if err != nil {
		return nil, err
	}
	recipients := make([]common.Address, per)
	for i := range recipients {
		recipients[i] = common.BigToAddress(big.NewInt(int64(0x10000 + i)))
	}
	total := 0
	var genErr error
	_, chain, _ := core.GenerateChainWithGenesis(genesis, beacon.New(ethash.NewFaker()), blocks+1, func(i int, g *core.BlockGen) {
		tip := big.NewInt(params.GWei)
		feeCap := new(big.Int).Add(new(big.Int).Mul(g.BaseFee(), big.NewInt(2)), tip)
		if i == 0 {
			g.AddTx(types.MustSignNewTx(key, signer, &types.DynamicFeeTx{ChainID: cfg.ChainID, Nonce: g.TxNonce(from),
				GasTipCap: tip, GasFeeCap: feeCap, Gas: 3_000_000,
				Data: append(append([]byte{}, testtoken.Stable.Bytecode...), ctor...)}))
			return
		}
		// Transactions of at most 100 mints stay under Osaka's 2^24 gas
		// cap per transaction even when each creates a balance (about
		// 110,000 gas on the dev chain's rules).
		for lo := 0; lo < per; lo += 100 {
			data, err := testtoken.Stable.ABI.Pack("mintBatch", recipients[lo:min(per, lo+100)], big.NewInt(int64(1+i)))
			if err != nil {
				genErr = err
				return
			}
			g.AddTx(types.MustSignNewTx(key, signer, &types.DynamicFeeTx{ChainID: cfg.ChainID, Nonce: g.TxNonce(from),
				GasTipCap: tip, GasFeeCap: feeCap, Gas: 16_000_000, To: &token, Data: data}))
		}
		total += per
	})
	if genErr != nil {
		return nil, genErr
	}
	stack, err := node.New(&node.Config{P2P: p2p.Config{NoDiscovery: true, MaxPeers: 0, ListenAddr: ""}})
	if err != nil {
		return nil, err
	}
	ec := ethconfig.Defaults
	ec.Genesis = genesis
	ec.SyncMode = ethconfig.FullSync
	ec.LogNoHistory = true // logs are read by block hash: no log index needed
	backend, err := eth.New(stack, &ec)
	if err != nil {
		return nil, err
	}
	// eth_getLogs is served by the filter API, which a node registers
	// separately (as geth's command does).
	stack.RegisterAPIs([]rpc.API{{Namespace: "eth", Service: filters.NewFilterAPI(filters.NewFilterSystem(
		backend.APIBackend, filters.Config{LogCacheSize: ec.FilterLogCacheSize}))}})
	if err := stack.Start(); err != nil {
		return nil, err
	}
	if _, err := backend.BlockChain().InsertChain(chain); err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	// Every mintBatch must have succeeded.
	for _, b := range chain[1:] {
		logs := 0
		for _, r := range backend.BlockChain().GetReceiptsByHash(b.Hash()) {
			if r.Status != types.ReceiptStatusSuccessful {
				return nil, fmt.Errorf("block %d: a mintBatch failed (gas used %d)", b.NumberU64(), r.GasUsed)
			}
			logs += len(r.Logs)
		}
		if logs != per {
			return nil, fmt.Errorf("block %d: %d logs, want %d", b.NumberU64(), logs, per)
		}
	}
	return &tokenChain{rpc: stack.Attach(), blocks: uint64(blocks + 1), token: token, transfers: total}, nil
}

// BenchmarkBackfillTransfers backfills a chain of Transfer logs (60
// blocks of mintBatch transactions emitting 1,000 logs each, by
// default) from an in-process go-ethereum node into PostgreSQL, with the
// token configured, and reports Transfer logs indexed per second. Logs are
// fetched per block by hash (EIP-234), one batch per batch of blocks.
//
//	go test -run '^$' -bench 'BackfillTransfers$' -benchtime 1x ./indexer
//
// -transfers.blocks and -transfers.per-block set the chain's shape.
func BenchmarkBackfillTransfers(b *testing.B) {
	tokenChainOnce.Do(func() {
		start := time.Now()
		tokenChainNode, tokenChainErr = newTokenChain(*benchTransferBlocks, *benchTransfersPer)
		if tokenChainErr == nil {
			fmt.Fprintf(os.Stderr, "generated and imported %d blocks with %d Transfer logs in %s\n",
				tokenChainNode.blocks, tokenChainNode.transfers, time.Since(start).Round(time.Millisecond))
		}
	})
	if tokenChainErr != nil {
		b.Fatal(tokenChainErr)
	}
	chain := tokenChainNode
	logger := slog.New(slog.DiscardHandler)
	if *benchVerboseLog {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	var elapsed time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		st := pgtest.New(b)
		ix, err := indexer.New(indexer.NewRPCSource(chain.rpc), st, indexer.Config{
			Backfill: true, BatchSize: *benchBatch, Concurrency: *benchConc, Logger: logger,
			Tokens: []common.Address{chain.token},
		})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		b.StartTimer()
		t0 := time.Now()
		go func() { done <- ix.Run(ctx) }()
		// Polled every 2 ms: the figure's resolution.
		wait.Poll{Timeout: time.Hour, Interval: 2 * time.Millisecond}.Until(b, "the indexer at the chain's last block", func() (bool, any) {
			c, err := st.GetCursor(ctx, store.CursorIndexer)
			return err == nil && c.BlockNumber == chain.blocks, fmt.Sprint(c.BlockNumber, err)
		})
		elapsed += time.Since(t0)
		b.StopTimer()
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		var n int
		if err := st.DB().Get(&n, `SELECT count(*) FROM token_transfers`); err != nil || n != chain.transfers {
			b.Fatalf("indexed %d transfers of %d (%v)", n, chain.transfers, err)
		}
	}
	b.ReportMetric(float64(chain.transfers)*float64(b.N)/elapsed.Seconds(), "transfers/s")
	b.ReportMetric(float64(chain.blocks+1)*float64(b.N)/elapsed.Seconds(), "blocks/s")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkTransferLogsRPC compares, on the same node and chain as
// BackfillTransfers, the two ways of asking for a chain's Transfer logs:
// per block by hash (EIP-234, batched 25 blocks a batch, what the indexer
// does) and by ranges of 25 block numbers. It reports logs/s of the node's
// answers alone (no database).
//
//	go test -run '^$' -bench 'TransferLogsRPC' -benchtime 3x ./indexer
func BenchmarkTransferLogsRPC(b *testing.B) {
	tokenChainOnce.Do(func() {
		tokenChainNode, tokenChainErr = newTokenChain(*benchTransferBlocks, *benchTransfersPer)
	})
	if tokenChainErr != nil {
		b.Fatal(tokenChainErr)
	}
	chain := tokenChainNode
	ctx := context.Background()
	src := indexer.NewRPCSource(chain.rpc)
	blocks, err := src.Blocks(ctx, 0, int(chain.blocks)+1, false)
	if err != nil {
		b.Fatal(err)
	}
	const per = 25
	b.Run("by-hash", func(b *testing.B) {
		for range b.N {
			n := 0
			for lo := 0; lo < len(blocks); lo += per {
				hdrs := make([]store.Block, 0, per)
				for _, bl := range blocks[lo:min(len(blocks), lo+per)] {
					hdrs = append(hdrs, bl.Block)
				}
				logs, err := src.TransferLogs(ctx, hdrs, []common.Address{chain.token})
				if err != nil {
					b.Fatal(err)
				}
				for _, l := range logs {
					n += len(l)
				}
			}
			if n != chain.transfers {
				b.Fatalf("%d logs, want %d", n, chain.transfers)
			}
		}
		b.ReportMetric(float64(chain.transfers)*float64(b.N)/b.Elapsed().Seconds(), "logs/s")
	})
	b.Run("by-range", func(b *testing.B) {
		for range b.N {
			n := 0
			for lo := uint64(0); lo <= chain.blocks; lo += per {
				var logs []json.RawMessage
				err := chain.rpc.CallContext(ctx, &logs, "eth_getLogs", map[string]any{
					"fromBlock": hexutil.Uint64(lo), "toBlock": hexutil.Uint64(min(chain.blocks, lo+per-1)),
					"address": []common.Address{chain.token}, "topics": [][]common.Hash{{indexer.TransferTopic}}})
				if err != nil {
					b.Fatal(err)
				}
				n += len(logs)
			}
			if n != chain.transfers {
				b.Fatalf("%d logs, want %d", n, chain.transfers)
			}
		}
		b.ReportMetric(float64(chain.transfers)*float64(b.N)/b.Elapsed().Seconds(), "logs/s")
	})
}
