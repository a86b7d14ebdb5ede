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
	"runtime"
	"runtime/pprof"
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
	"github.com/ethereum/go-ethereum/node"
	"github.com/ethereum/go-ethereum/p2p"
	"github.com/ethereum/go-ethereum/params"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/evmpay/evmpay/hosts/evmpaytest/wait"
	"github.com/evmpay/evmpay/indexer"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
)

var (
	benchBlocks     = flag.Int("backfill.blocks", 5000, "blocks in the benchmark chain")
	benchBusyEvery  = flag.Int("backfill.busy-every", 10, "every n-th block is busy")
	benchBusyTxs    = flag.Int("backfill.busy-txs", 100, "transactions in a busy block")
	benchQuietTxs   = flag.Int("backfill.quiet-txs", 2, "transactions in the other blocks")
	benchBatch      = flag.Int("backfill.batch", 0, "Config.BatchSize (0: default)")
	benchConc       = flag.Int("backfill.concurrency", 0, "Config.Concurrency (0: default)")
	benchVerboseLog = flag.Bool("backfill.log", false, "print the indexer's log")
	benchProfile    = flag.String("backfill.cpuprofile", "", "write a CPU profile of the timed part here")
)

// benchChain is a chain generated with core.GenerateChain and imported
// into an in-process go-ethereum node that serves it over JSON-RPC.
type benchChain struct {
	rpc    *rpc.Client
	blocks uint64 // head block number
	txs    int
}

var (
	benchOnce  sync.Once
	benchNode  *benchChain
	benchError error
)

func loadBenchChain(b *testing.B) *benchChain {
	b.Helper()
	benchOnce.Do(func() {
		start := time.Now()
		benchNode, benchError = newBenchChain(*benchBlocks, func(i int) int {
			if (i+1)%*benchBusyEvery == 0 {
				return *benchBusyTxs
			}
			return *benchQuietTxs
		})
		if benchError == nil {
			fmt.Fprintf(os.Stderr, "generated and imported %d blocks with %d transactions in %s\n",
				benchNode.blocks, benchNode.txs, time.Since(start).Round(time.Millisecond))
		}
	})
	if benchError != nil {
		b.Fatal(benchError)
	}
	return benchNode
}

func newBenchChain(n int, txsIn func(i int) int) (*benchChain, error) {
	key, _ := crypto.GenerateKey()
	from := crypto.PubkeyToAddress(key.PublicKey)
	funds, _ := new(big.Int).SetString("1000000000000000000000000000", 10)
	alloc := core.SystemContractAllocs()
	maps.Copy(alloc, types.GenesisAlloc{from: {Balance: funds}})
	cfg := *params.AllDevChainProtocolChanges
	genesis := &core.Genesis{Config: &cfg, GasLimit: 60_000_000, Alloc: alloc, Difficulty: big.NewInt(0),
		BaseFee: big.NewInt(params.InitialBaseFee)}
	signer := types.LatestSigner(&cfg)
	total := 0
	_, blocks, _ := core.GenerateChainWithGenesis(genesis, beacon.New(ethash.NewFaker()), n, func(i int, g *core.BlockGen) {
		for j := range txsIn(i) {
			to := common.BigToAddress(big.NewInt(int64(0x10000 + (i*7+j)%5000)))
			tip := big.NewInt(params.GWei)
			tx := types.MustSignNewTx(key, signer, &types.DynamicFeeTx{
				ChainID: cfg.ChainID, Nonce: g.TxNonce(from), To: &to, Value: big.NewInt(int64(1 + j)),
				Gas: 21000, GasTipCap: tip, GasFeeCap: new(big.Int).Add(new(big.Int).Mul(g.BaseFee(), big.NewInt(2)), tip),
			})
			g.AddTx(tx)
			total++
		}
	})
	stack, err := node.New(&node.Config{P2P: p2p.Config{NoDiscovery: true, MaxPeers: 0, ListenAddr: ""}})
	if err != nil {
		return nil, err
	}
	ec := ethconfig.Defaults
	ec.Genesis = genesis
	ec.SyncMode = ethconfig.FullSync
	ec.LogNoHistory = true // no background log indexing competing for the CPU
	backend, err := eth.New(stack, &ec)
	if err != nil {
		return nil, err
	}
	if err := stack.Start(); err != nil {
		return nil, err
	}
	if _, err := backend.BlockChain().InsertChain(blocks); err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	if head := backend.BlockChain().CurrentBlock().Number.Uint64(); head != uint64(n) {
		return nil, fmt.Errorf("head is %d after importing %d blocks", head, n)
	}
	return &benchChain{rpc: stack.Attach(), blocks: uint64(n), txs: total}, nil
}

// BenchmarkBackfill backfills the generated chain (5,000 blocks by
// default, every tenth with 100 transactions and the others with 2) from
// an in-process go-ethereum node into PostgreSQL, and reports blocks/s and
// transactions/s. The node shares the CPU with the indexer and PostgreSQL:
// recovering every transaction's sender (geth does not store it) is most of
// its work.
//
//	go test -run '^$' -bench 'Backfill$' -benchtime 1x ./indexer
//
// The chain's shape is set with -args: -backfill.blocks, -backfill.busy-every,
// -backfill.busy-txs, -backfill.quiet-txs; the indexer's with
// -backfill.batch and -backfill.concurrency; -backfill.log prints its
// progress lines and -backfill.cpuprofile profiles the timed part.
func BenchmarkBackfill(b *testing.B) {
	chain := loadBenchChain(b)
	benchBackfill(b, chain.rpc, chain)
}

// BenchmarkBackfillReplay is BenchmarkBackfill without the node's own
// work: the node's eth_getBlockByNumber answers are recorded once (not
// timed) and served from memory by go-ethereum's rpc.Server, so what is
// measured is the indexer (JSON-RPC client, decoding, ordering) and
// PostgreSQL.
//
//	go test -run '^$' -bench 'BackfillReplay$' -benchtime 1x ./indexer
func BenchmarkBackfillReplay(b *testing.B) {
	chain := loadBenchChain(b)
	rec, err := record(chain)
	if err != nil {
		b.Fatal(err)
	}
	srv := rpc.NewServer()
	if err := srv.RegisterName("eth", rec); err != nil {
		b.Fatal(err)
	}
	defer srv.Stop()
	client := rpc.DialInProc(srv)
	defer client.Close()
	benchBackfill(b, client, chain)
}

// recording holds a node's answers.
type recording struct {
	chainID hexutil.Uint64
	head    hexutil.Uint64
	full    []json.RawMessage
}

func record(chain *benchChain) (*recording, error) {
	ctx := context.Background()
	rec := &recording{head: hexutil.Uint64(chain.blocks), chainID: 1337}
	for from := uint64(0); from <= chain.blocks; from += 100 {
		n := min(100, chain.blocks-from+1)
		raws := make([]json.RawMessage, n)
		batch := make([]rpc.BatchElem, n)
		for i := range batch {
			batch[i] = rpc.BatchElem{Method: "eth_getBlockByNumber",
				Args: []any{hexutil.Uint64(from + uint64(i)), true}, Result: &raws[i]}
		}
		if err := chain.rpc.BatchCallContext(ctx, batch); err != nil {
			return nil, err
		}
		for i := range batch {
			if batch[i].Error != nil {
				return nil, batch[i].Error
			}
		}
		rec.full = append(rec.full, raws...)
	}
	return rec, nil
}

func (r *recording) ChainId() hexutil.Uint64     { return r.chainID }
func (r *recording) BlockNumber() hexutil.Uint64 { return r.head }

// GetBlockByNumber answers header requests (full false: the chain-identity
// check) with the full block too: the header decoder counts the
// transactions without reading them.
func (r *recording) GetBlockByNumber(n hexutil.Uint64, full bool) (json.RawMessage, error) {
	if uint64(n) >= uint64(len(r.full)) {
		return nil, nil
	}
	return r.full[n], nil
}

func benchBackfill(b *testing.B, client *rpc.Client, chain *benchChain) {
	logger := slog.New(slog.DiscardHandler)
	if *benchVerboseLog {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	var (
		elapsed    time.Duration
		cpu, pgCPU time.Duration
		alloc      uint64
	)
	if *benchProfile != "" {
		f, err := os.Create(*benchProfile)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		st := pgtest.New(b)
		ix, err := indexer.New(indexer.NewRPCSource(client), st, indexer.Config{
			Backfill: true, BatchSize: *benchBatch, Concurrency: *benchConc,
			Logger: logger, ProgressInterval: time.Second,
		})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		c0 := readCPU()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
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
		runtime.ReadMemStats(&m1)
		alloc += m1.TotalAlloc - m0.TotalAlloc
		c1 := readCPU()
		cpu += c1.proc - c0.proc
		pgCPU += c1.server - c0.server
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
	blocks := float64(chain.blocks+1) * float64(b.N)
	txs := float64(chain.txs) * float64(b.N)
	b.ReportMetric(blocks/elapsed.Seconds(), "blocks/s")
	b.ReportMetric(txs/elapsed.Seconds(), "txs/s")
	// CPU per transaction: this process (node, indexer, database client)
	// and the PostgreSQL server; "cores" is how many of the machine's
	// cores both kept busy on average.
	b.ReportMetric(float64(cpu.Microseconds())/txs, "proc-µs/tx")
	b.ReportMetric(float64(pgCPU.Microseconds())/txs, "pg-µs/tx")
	b.ReportMetric((cpu+pgCPU).Seconds()/elapsed.Seconds(), "cores")
	// Bytes allocated in this process (node and indexer) per transaction:
	// the garbage collector's work grows with it.
	b.ReportMetric(float64(alloc)/txs, "alloc-B/tx")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkBlockRPC times what the indexer asks the live node for, without
// the indexer: every block of the benchmark chain by eth_getBlockByNumber,
// in batches of 100 (one at a time, results kept as json.RawMessage, so
// the figures are the node's work plus the JSON-RPC client's).
//
//   - full: with full transactions, what a backfill asks: the node reads
//     each block from its database and recovers each transaction's sender
//     for the "from" field;
//
//   - full-cached: the same batch asked a second time right after the
//     first (not timed): geth keeps the last 256 blocks it read, with their
//     senders, so the second answer is what a cached sender saves;
//
//   - hashes: transaction hashes only, what the chain checks ask.
//
//     go test -run '^$' -bench 'BlockRPC' -benchtime 1x ./indexer
func BenchmarkBlockRPC(b *testing.B) {
	chain := loadBenchChain(b)
	for _, c := range []struct {
		name         string
		full, cached bool
	}{{"full", true, false}, {"full-cached", true, true}, {"hashes", false, false}} {
		b.Run(c.name, func(b *testing.B) {
			var cpu time.Duration
			for range b.N {
				for from := uint64(0); from <= chain.blocks; from += 100 {
					n := min(100, chain.blocks-from+1)
					if c.cached {
						b.StopTimer()
						getBlocks(b, chain, from, n, c.full)
						b.StartTimer()
					}
					c0 := readCPU().proc
					getBlocks(b, chain, from, n, c.full)
					cpu += readCPU().proc - c0
				}
			}
			blocks := float64(chain.blocks+1) * float64(b.N)
			txs := float64(chain.txs) * float64(b.N)
			b.ReportMetric(blocks/b.Elapsed().Seconds(), "blocks/s")
			b.ReportMetric(txs/b.Elapsed().Seconds(), "txs/s")
			b.ReportMetric(float64(cpu.Microseconds())/txs, "proc-µs/tx")
			b.ReportMetric(0, "ns/op")
		})
	}
}

func getBlocks(b *testing.B, chain *benchChain, from, n uint64, full bool) {
	raws := make([]json.RawMessage, n)
	batch := make([]rpc.BatchElem, n)
	for i := range batch {
		batch[i] = rpc.BatchElem{Method: "eth_getBlockByNumber",
			Args: []any{hexutil.Uint64(from + uint64(i)), full}, Result: &raws[i]}
	}
	if err := chain.rpc.BatchCallContext(context.Background(), batch); err != nil {
		b.Fatal(err)
	}
	for i := range batch {
		if batch[i].Error != nil {
			b.Fatal(batch[i].Error)
		}
	}
}
