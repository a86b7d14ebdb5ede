// Command simulated-chain shows how to test code that takes payments
// against go-ethereum's simulated backend — a real EVM in process — instead
// of a mock: it wires the indexer, settlement and the invoice service to a
// simulated chain and a SQLite store, pays an invoice, mines blocks by hand
// and prints each status change.
//
//	go run ./examples/simulated-chain
//
// main_test.go runs the same flow as a test; copy it to test your own
// integration.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/ethclient/simulated"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/evmpay/evmpay/hdwallet"
	"github.com/evmpay/evmpay/indexer"
	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/settlement"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/api"
	"github.com/evmpay/evmpay/store/sqlite"
)

func main() {
	dir, err := os.MkdirTemp("", "evmpay-sim-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)
	if err := run(context.Background(), filepath.Join(dir, "evmpay.db"), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "simulated-chain:", err)
		os.Exit(1)
	}
}

// run pays one invoice on a simulated chain and returns once it is
// CONFIRMED, printing every status it goes through.
func run(ctx context.Context, dbPath string, out io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// A payer with funds at genesis.
	payer, _ := crypto.GenerateKey()
	payerAddr := crypto.PubkeyToAddress(payer.PublicKey)
	backend := simulated.NewBackend(types.GenesisAlloc{payerAddr: {Balance: big.NewInt(1e18)}})
	defer backend.Close()
	client := backend.Client()
	rawRPC := inProcessRPC(client)

	st, err := sqlite.Open(ctx, dbPath, sqlite.Config{})
	if err != nil {
		return err
	}
	defer st.Close()

	// The deposit wallet: only its public side goes to the invoice service.
	m, err := hdwallet.GenerateMnemonic(24)
	if err != nil {
		return err
	}
	w, err := hdwallet.NewWallet(m, "")
	if err != nil {
		return err
	}
	creds, err := invoice.NewCredentials([]byte("a-test-secret-key-of-32-bytes!!!"))
	if err != nil {
		return err
	}
	invoices, err := invoice.New(st, creds, w.Deriver(), 1337, invoice.Config{})
	if err != nil {
		return err
	}
	merchant, err := invoices.CreateMerchant(ctx, invoice.MerchantParams{SettlementAddress: common.HexToAddress("0x70997970C51812dc3A010C7d01b50e0d17dc79C8")})
	if err != nil {
		return err
	}

	// The workers, polling fast because blocks come when we say so.
	ix, err := indexer.New(indexer.NewRPCSource(rawRPC), st, indexer.Config{Backfill: true, PollInterval: 20 * time.Millisecond})
	if err != nil {
		return err
	}
	settler, err := settlement.New(st, settlement.Config{PollInterval: 20 * time.Millisecond})
	if err != nil {
		return err
	}
	go ix.Run(ctx)
	go settler.Run(ctx)

	// Create an invoice through the real HTTP API.
	api := httptest.NewServer(invoices.Handler())
	defer api.Close()
	inv, err := createInvoice(api.URL, merchant.APIKey, "250000")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "invoice %d: %s, pay %s wei\n", inv.ID, inv.Status, inv.AmountWei)

	// Pay it from the payer, then mine.
	head, err := client.HeaderByNumber(ctx, nil)
	if err != nil {
		return err
	}
	deposit := common.Address(inv.DepositAddress)
	tx, err := types.SignTx(types.NewTx(&types.DynamicFeeTx{
		ChainID: big.NewInt(1337), Nonce: 0, GasTipCap: big.NewInt(1e9),
		GasFeeCap: new(big.Int).Add(new(big.Int).Mul(head.BaseFee, big.NewInt(2)), big.NewInt(1e9)),
		Gas:       21_000, To: &deposit, Value: inv.Amount.Big(),
	}), types.LatestSignerForChainID(big.NewInt(1337)), payer)
	if err != nil {
		return err
	}
	if err := client.SendTransaction(ctx, tx); err != nil {
		return err
	}

	last := inv.Status
	for blocks := 0; blocks < 40; blocks++ {
		backend.Commit()
		deadline := time.Now().Add(2 * time.Second)
		for {
			got, err := st.GetInvoice(ctx, inv.ID)
			if err != nil {
				return err
			}
			if got.Status != last {
				last = got.Status
				fmt.Fprintf(out, "after block %d: %s (paid %s wei)\n", blocks+1, got.Status, got.PaidWei)
			}
			if got.Status == store.StatusConfirmed {
				return nil
			}
			if settled, err := st.GetCursor(ctx, store.CursorSettlement); err == nil && settled.BlockNumber >= uint64(blocks+1) {
				break // settlement has seen this block
			}
			if time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return fmt.Errorf("invoice %d never confirmed (last status %s)", inv.ID, last)
}

// createInvoice POSTs /v1/invoices and decodes the answer.
func createInvoice(base, apiKey, amountWei string) (api.Invoice, error) {
	req, err := http.NewRequest("POST", base+"/v1/invoices", strings.NewReader(`{"amount_wei":"`+amountWei+`"}`))
	if err != nil {
		return api.Invoice{}, err
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Idempotency-Key", "example-1")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return api.Invoice{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		b, _ := io.ReadAll(resp.Body)
		return api.Invoice{}, fmt.Errorf("create invoice: %s: %s", resp.Status, b)
	}
	var inv api.Invoice
	return inv, json.NewDecoder(resp.Body).Decode(&inv)
}

// inProcessRPC returns the simulated backend's in-process *rpc.Client, which
// the indexer reads raw JSON-RPC through. go-ethereum v1.17 embeds it in an
// unexported struct field named Client, which hides the Client() method from
// a type assertion, so reflection fetches it.
func inProcessRPC(c simulated.Client) *rpc.Client {
	return reflect.ValueOf(c).FieldByName("Client").Interface().(*ethclient.Client).Client()
}
