package indexer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/params"

	"github.com/evmpay/evmpay/hosts/evmpaytest/simchain"
	"github.com/evmpay/evmpay/indexer"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/sqlite"
)

// An indexer backfills a simulated chain into SQLite and serves it through
// the read API.
func ExampleNew() {
	ctx := context.Background()
	key, _ := crypto.GenerateKey()
	from := crypto.PubkeyToAddress(key.PublicKey)
	sim := simchain.NewBackend(types.GenesisAlloc{from: {Balance: big.NewInt(params.Ether)}})
	defer sim.Close()
	// Three blocks, the second with a payment.
	sim.Commit()
	to := from
	tx, _ := types.SignNewTx(key, types.LatestSignerForChainID(big.NewInt(1337)), &types.DynamicFeeTx{
		ChainID: big.NewInt(1337), To: &to, Value: big.NewInt(12345), Gas: 21000,
		GasTipCap: big.NewInt(params.GWei), GasFeeCap: big.NewInt(10 * params.GWei),
	})
	if err := sim.Client().SendTransaction(ctx, tx); err != nil {
		panic(err)
	}
	sim.Commit()
	sim.Commit()

	dir, _ := os.MkdirTemp("", "indexer-example")
	defer os.RemoveAll(dir)
	db, err := sqlite.Open(ctx, filepath.Join(dir, "evmpay.db"), sqlite.Config{})
	if err != nil {
		panic(err)
	}
	defer db.Close()
	// The chain's rows: one database can hold several chains' indexes.
	st := db.Chain(1337)

	// The simulated backend is read through go-ethereum's client
	// interfaces; a host on a Cosmos EVM chain uses
	// indexer.NewRPCSource(rpc.Dial(RPC_URL)), which keeps the node's
	// block hashes.
	ix, err := indexer.New(indexer.NewClientSource(sim.Client()), st, indexer.Config{
		Backfill:     true, // INDEXER_BACKFILL=true: from genesis, then follow
		PollInterval: 10 * time.Millisecond,
	})
	if err != nil {
		panic(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- ix.Run(runCtx) }()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if c, err := st.GetCursor(ctx, store.CursorIndexer); err == nil && c.BlockNumber == 3 {
			break
		}
	}
	stop()
	fmt.Println("Run:", <-done)

	api, err := indexer.NewReadAPI(st, indexer.ReadAPIConfig{})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	api.Register(mux) // beside the host's other routes
	srv := httptest.NewServer(mux)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/v1/blocks/2")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	var b struct {
		Number       uint64 `json:"number"`
		Transactions []struct {
			ValueWei string `json:"value_wei"`
		} `json:"transactions"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&b)
	fmt.Println(resp.StatusCode, "block", b.Number, "pays", b.Transactions[0].ValueWei, "wei")
	// Output:
	// Run: <nil>
	// 200 block 2 pays 12345 wei
}

// The read API's answer for a block: its header and its transactions, wei
// as decimal strings.
func ExampleNewReadAPI() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "readapi-example")
	defer os.RemoveAll(dir)
	db, err := sqlite.Open(ctx, filepath.Join(dir, "evmpay.db"), sqlite.Config{})
	if err != nil {
		panic(err)
	}
	defer db.Close()
	st := db.Chain(1337) // the API serves one chain's index
	fee := store.NewAmount(7)
	to := common.HexToAddress("0x00000000000000000000000000000000c0ffee00")
	block := store.Block{Number: 7, Hash: common.HexToHash("0x07"), ParentHash: common.HexToHash("0x06"),
		Timestamp: 1_700_000_000, GasLimit: 30_000_000, GasUsed: 21_000, BaseFeeWei: &fee, TxCount: 1,
		IndexedAt: time.Now()}
	tx := store.Transaction{Hash: common.HexToHash("0xaa"), BlockNumber: 7, BlockHash: block.Hash,
		From: common.HexToAddress("0x01"), To: &to, ValueWei: store.MustParseAmount("1000000000000000000"),
		Gas: 21_000, Type: 2, MaxFeeWei: &fee, MaxPriorityFeeWei: &fee, Input: []byte{}}
	if err := st.InsertBlocks(ctx, []store.Block{block}, []store.Transaction{tx}); err != nil {
		panic(err)
	}

	api, err := indexer.NewReadAPI(st, indexer.ReadAPIConfig{StaleAfter: -1})
	if err != nil {
		panic(err)
	}
	rec := httptest.NewRecorder()
	api.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/blocks/7", nil))
	var out bytes.Buffer
	_ = json.Indent(&out, rec.Body.Bytes(), "", "  ")
	fmt.Println(rec.Code)
	fmt.Println(out.String())
	// Output:
	// 200
	// {
	//   "number": 7,
	//   "hash": "0x0000000000000000000000000000000000000000000000000000000000000007",
	//   "parent_hash": "0x0000000000000000000000000000000000000000000000000000000000000006",
	//   "timestamp": 1700000000,
	//   "time": "2023-11-14T22:13:20Z",
	//   "miner": "0x0000000000000000000000000000000000000000",
	//   "gas_limit": 30000000,
	//   "gas_used": 21000,
	//   "base_fee_wei": "7",
	//   "transaction_count": 1,
	//   "transactions": [
	//     {
	//       "hash": "0x00000000000000000000000000000000000000000000000000000000000000aa",
	//       "block_number": 7,
	//       "block_hash": "0x0000000000000000000000000000000000000000000000000000000000000007",
	//       "transaction_index": 0,
	//       "from": "0x0000000000000000000000000000000000000001",
	//       "to": "0x00000000000000000000000000000000C0FfeE00",
	//       "value_wei": "1000000000000000000",
	//       "nonce": 0,
	//       "gas": 21000,
	//       "type": 2,
	//       "gas_price_wei": null,
	//       "max_fee_wei": "7",
	//       "max_priority_fee_wei": "7",
	//       "input": "0x"
	//     }
	//   ]
	// }
}
