package indexer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"time"

	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/ethclient/simulated"
	"github.com/ethereum/go-ethereum/params"
	"github.com/ethereum/go-ethereum/rpc"

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
	sim := simulated.NewBackend(types.GenesisAlloc{from: {Balance: big.NewInt(params.Ether)}})
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
	st, err := sqlite.Open(ctx, filepath.Join(dir, "evmpay.db"), sqlite.Config{})
	if err != nil {
		panic(err)
	}
	defer st.Close()

	// A host would use rpc.Dial(RPC_URL); the simulated backend has an
	// in-process client.
	var client *rpc.Client = simulatedRPC(sim)
	ix, err := indexer.New(indexer.NewRPCSource(client), st, indexer.Config{
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

// simulatedRPC digs the in-process *rpc.Client out of the simulated
// backend's client (see inProcessRPC).
func simulatedRPC(sim *simulated.Backend) *rpc.Client {
	return reflect.ValueOf(sim.Client()).FieldByName("Client").Interface().(*ethclient.Client).Client()
}
