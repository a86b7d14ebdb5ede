package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/evmpaytest/rpcreplay"
	"github.com/evmpay/evmpay/indexer"
	"github.com/evmpay/evmpay/settlement"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
)

// evmdRecording is what testdata/evmd holds: every JSON-RPC call payd's
// processes and the test made to a real evmd v0.7.0 node in a run of
// scripts/evmd-e2e.sh, and the manifest of that run's invoices.
type evmdRecording struct {
	calls    []rpcreplay.Call
	manifest evmdManifest
}

// evmdSendError is one refusal evmd answered to eth_sendRawTransaction and
// the sweep's class for it.
type evmdSendError struct {
	What    string `json:"what"`
	Class   string `json:"class"`
	Message string `json:"message"`
}

// evmdManifest says what the recorded run did, for the replay test.
type evmdManifest struct {
	ChainID  uint64        `json:"chain_id"`
	Tokens   []evmdToken   `json:"tokens"`
	Invoices []evmdInvoice `json:"invoices"`
	// SendErrors are evmd's refusals of transactions.
	SendErrors []evmdSendError `json:"send_errors"`
	// Head is the highest block the recorded indexer fetched.
	Head uint64 `json:"head"`
	// WrongNetwork (the two-chain run) are payments sent on evmd to
	// invoices of the other chain.
	WrongNetwork []evmdWrongNetwork `json:"wrong_network,omitempty"`
	// Finality is the run's (FINALITY; "" is depth).
	Finality string `json:"finality,omitempty"`
	// MovedAway (the two-chain run) are the deposit addresses of evmd
	// invoices paid on the other chain (they moved there).
	MovedAway []string `json:"moved_away,omitempty"`
}

// evmdWrongNetwork is a payment of the recorded run to an invoice of
// another chain, sent on evmd.
type evmdWrongNetwork struct {
	InvoiceChainID uint64 `json:"invoice_chain_id"`
	DepositAddress string `json:"deposit_address"`
	Amount         string `json:"amount"`
	// SweepTxs are the transactions the refund engine stored on evmd for
	// the invoice (the refund's gas funding is not a payment).
	SweepTxs []store.SweepTx `json:"sweep_txs"`
}

type evmdToken struct {
	Symbol   string `json:"symbol"`
	Address  string `json:"address"`
	Decimals uint8  `json:"decimals"`
}

// evmdInvoice is an invoice of the recorded run as the API showed it when
// it was SETTLED.
type evmdInvoice struct {
	ID             int64           `json:"id"`
	DepositAddress string          `json:"deposit_address"`
	Asset          json.RawMessage `json:"asset,omitempty"`
	Amount         string          `json:"amount"`
	Paid           string          `json:"paid"`
	Underpaid      bool            `json:"underpaid"`
	Overpaid       bool            `json:"overpaid"`
	NeedsAttention bool            `json:"needs_attention"`
	CreatedAt      time.Time       `json:"created_at"`
	ExpiresAt      time.Time       `json:"expires_at"`
	// SweepTxs are the transactions the sweep stored for the invoice:
	// settlement never takes them for payments.
	SweepTxs []store.SweepTx `json:"sweep_txs"`
}

func loadEvmdRecording(t *testing.T, name string) evmdRecording {
	t.Helper()
	dir := filepath.Join("testdata", name)
	calls, err := rpcreplay.Load(filepath.Join(dir, "transcript.jsonl.gz"))
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	require.NoError(t, err)
	var rec evmdRecording
	rec.calls = calls
	require.NoError(t, json.Unmarshal(b, &rec.manifest))
	require.NotZero(t, rec.manifest.Head)
	require.NotEmpty(t, rec.manifest.Invoices)
	return rec
}

// TestEvmdReplay runs the chain identity check, the indexer (blocks and the
// test tokens' Transfer logs) and settlement against what a real Cosmos EVM
// node — evmd v0.7.0 — answered during a run of the project's evmd
// end-to-end tests, replayed from testdata/evmd: a change that breaks on
// evmd's answers (block 0 answered with block 1, its own block hashes, its
// receipts and logs) fails here, in make test, where evmd cannot be built.
// The run's invoices are created again at their deposit addresses, and
// settlement must find exactly what the live run found: the amounts paid,
// the flags, every invoice confirmed.
//
// To re-record (after a change to what payd asks the node, or for a newer
// evmd): build evmd v0.7.0 from a cosmos/evm checkout and run
//
//	scripts/evmd-e2e.sh /path/to/evmd --record
//
// then commit hosts/payd/testdata/evmd.
func TestEvmdReplay(t *testing.T) {
	t.Parallel()
	replayEvmd(t, "evmd")
}

// TestEvmdTwoChainsReplay replays what evmd answered in the two-chain run
// (TestEvmd_TwoChains_OneServe: one payd serve on evmd and the geth dev
// chain), testdata/evmd-two-chains: evmd's invoices are confirmed as
// there; a payment sent on evmd to a dev-chain invoice's address is
// recorded on evmd as wrong-network (never credited, the invoice flagged)
// and the refund engine's transactions on evmd are no payment; an evmd
// invoice paid on the dev chain sees nothing on evmd. Re-record with
// `scripts/evmd-e2e.sh /path/to/evmd --record -run TestEvmd_TwoChains`.
func TestEvmdTwoChainsReplay(t *testing.T) {
	t.Parallel()
	replayEvmd(t, "evmd-two-chains")
}

// replayEvmd replays testdata/<name> (see TestEvmdReplay).
func replayEvmd(t *testing.T, name string) {
	ctx := context.Background()
	rec := loadEvmdRecording(t, name)
	m := rec.manifest
	rp, err := rpcreplay.NewReplayer(rec.calls, m.Head)
	require.NoError(t, err)
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	client, err := rpc.DialHTTP(srv.URL)
	require.NoError(t, err)
	t.Cleanup(client.Close)
	src := indexer.NewRPCSource(client)
	db := pgtest.New(t)
	st := db.Chain(m.ChainID) // evmd's rows

	// evmd answers a request for block 0 with block 1 (a CometBFT chain
	// has no block 0): the chain's first block is 1, and its hash is what
	// identifies the chain.
	var block1 struct {
		Hash       common.Hash `json:"hash"`
		ParentHash common.Hash `json:"parentHash"`
		Number     string      `json:"number"`
	}
	var found bool
	for _, c := range rpcreplay.Find(rec.calls, "eth_getBlockByNumber") {
		if strings.HasPrefix(string(c.Params), `["0x0",`) {
			require.NoError(t, json.Unmarshal(c.Result, &block1))
			found = true
		}
	}
	require.True(t, found, "the transcript holds evmd's answer for block 0")
	require.Equal(t, "0x1", block1.Number, "evmd answers block 0 with block 1")
	require.Equal(t, common.Hash{}, block1.ParentHash)

	id, err := indexer.NewIdentity(src, st, indexer.IdentityConfig{ChainID: m.ChainID})
	require.NoError(t, err)
	status, err := id.Check(ctx)
	require.NoError(t, err, "the identity guard accepts evmd")
	require.Equal(t, uint64(1), status.GenesisNumber)
	require.Equal(t, block1.Hash, status.GenesisHash)
	require.Equal(t, m.Head, status.NodeHead)

	// The run's merchant and invoices, at their deposit addresses.
	merchant := store.Merchant{Name: "evmd shop", APIKeyDigest: make([]byte, 32), APIKeyHash: "x", APIKeyPrefix: "sk",
		WebhookURL: "https://example.com/hooks", WebhookSecretCiphertext: make([]byte, 60),
		SettlementAddress: common.HexToAddress("0x00000000000000000000000000000000000000Aa"),
		CreatedAt:         time.Now(), UpdatedAt: time.Now()}
	require.NoError(t, st.CreateMerchant(ctx, &merchant))
	assets := []store.Asset{store.NativeAsset("ETH")}
	var tokens []common.Address
	for _, tok := range m.Tokens {
		addr := common.HexToAddress(tok.Address)
		assets = append(assets, store.Asset{Symbol: tok.Symbol, Address: &addr, Decimals: tok.Decimals})
		tokens = append(tokens, addr)
	}
	ids := map[int64]int64{} // the recorded id → the replay's
	for _, want := range m.Invoices {
		idx, err := st.NextDerivationIndex(ctx)
		require.NoError(t, err)
		inv := store.Invoice{MerchantID: merchant.ID, Status: store.StatusPending,
			AmountWei: store.MustParseAmount(want.Amount), ChainID: m.ChainID,
			DepositAddress: common.HexToAddress(want.DepositAddress), DerivationIndex: idx,
			PaymentURI: "ethereum:" + want.DepositAddress, LookupTokenHash: make([]byte, 32),
			ExpiresAt: want.ExpiresAt, CreatedAt: want.CreatedAt, UpdatedAt: want.CreatedAt, SweepStatus: store.SweepNone}
		if string(want.Asset) != "null" {
			var a store.Asset
			require.NoError(t, json.Unmarshal(want.Asset, &a))
			inv.SetAsset(a)
		}
		inv.LookupTokenHash[0] = byte(want.ID)
		require.NoError(t, st.CreateInvoice(ctx, &inv))
		ids[want.ID] = inv.ID
		// The sweep's transactions as the run stored them (before it sent
		// them): its fundings of the deposit address are not payments.
		for _, tx := range want.SweepTxs {
			tx.ID, tx.InvoiceID, tx.RawTx = 0, &inv.ID, []byte{0}
			require.NoError(t, st.CreateSweepTx(ctx, &tx))
		}
	}

	// The two-chain run's other invoices: the dev chain's whose address was
	// paid on evmd (with the refund engine's transactions on evmd), and
	// evmd's that were paid on the dev chain.
	wrongIDs := map[string]int64{}
	newInvoice := func(chain uint64, deposit, amount string) store.Invoice {
		idx, err := st.NextDerivationIndex(ctx)
		require.NoError(t, err)
		inv := store.Invoice{MerchantID: merchant.ID, Status: store.StatusPending, AmountWei: store.MustParseAmount(amount),
			ChainID: chain, DepositAddress: common.HexToAddress(deposit), DerivationIndex: idx, PaymentURI: "ethereum:" + deposit,
			LookupTokenHash: make([]byte, 32), ExpiresAt: time.Now().Add(time.Hour), CreatedAt: time.Now(), UpdatedAt: time.Now(),
			SweepStatus: store.SweepNone}
		inv.LookupTokenHash[0], inv.LookupTokenHash[1] = 0xee, byte(idx)
		require.NoError(t, st.CreateInvoice(ctx, &inv))
		return inv
	}
	for _, w := range m.WrongNetwork {
		require.NotEqual(t, m.ChainID, w.InvoiceChainID)
		inv := newInvoice(w.InvoiceChainID, w.DepositAddress, w.Amount)
		wrongIDs[w.DepositAddress] = inv.ID
		for _, tx := range w.SweepTxs {
			tx.ID, tx.InvoiceID, tx.OutboundID, tx.RawTx = 0, &inv.ID, nil, []byte{0}
			require.NoError(t, st.CreateSweepTx(ctx, &tx))
		}
	}
	movedIDs := map[string]int64{}
	for _, d := range m.MovedAway {
		movedIDs[d] = newInvoice(m.ChainID, d, "1").ID
	}

	// The indexer from the first block the live indexer fetched, up to the
	// head, then settlement over what it indexed.
	first := m.Head
	for _, c := range rpcreplay.Find(rec.calls, "eth_getBlockByNumber") {
		var args []json.RawMessage
		var n string
		var full bool
		if json.Unmarshal(c.Params, &args) == nil && len(args) == 2 && json.Unmarshal(args[0], &n) == nil &&
			json.Unmarshal(args[1], &full) == nil && full && strings.HasPrefix(n, "0x") {
			if v, err := hexutil.DecodeUint64(n); err == nil && v > 0 {
				first = min(first, v)
			}
		}
	}
	ix, err := indexer.New(src, st, indexer.Config{ChainID: m.ChainID, Backfill: true, StartBlock: first,
		Tokens: tokens, PollInterval: 10 * time.Millisecond})
	require.NoError(t, err)
	sl, err := settlement.New(st, settlement.Config{Assets: assets, PollInterval: 10 * time.Millisecond, Finality: m.Finality,
		Now: func() time.Time { return m.Invoices[len(m.Invoices)-1].CreatedAt.Add(time.Minute) }})
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- ix.Run(runCtx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("indexer: %v", err)
		}
	}()
	waitUntil(t, 60*time.Second, 20*time.Millisecond, func() bool {
		c, err := st.GetCursor(ctx, store.CursorIndexer)
		return err == nil && c.BlockNumber == m.Head
	}, func() string { return "the indexer never reached the recorded head" })
	// One settlement round over everything indexed: its blocks, then the
	// confirmation pass. (Run's rounds move the cursor before they confirm:
	// a cursor at the head did not mean the invoices were confirmed yet.)
	require.NoError(t, sl.Sync(ctx))
	c, err := st.GetCursor(ctx, store.CursorSettlement)
	require.NoError(t, err)
	require.Equal(t, m.Head, c.BlockNumber, "settlement reached the recorded head")

	for _, want := range m.Invoices {
		got, err := st.GetInvoice(ctx, ids[want.ID])
		require.NoError(t, err)
		require.Equal(t, want.Paid, got.PaidWei.String(), "invoice %d: the amount paid", want.ID)
		require.Equal(t, store.StatusConfirmed, got.Status, "invoice %d: confirmed (the replay has no sweep)", want.ID)
		require.Equal(t, want.Underpaid, got.Underpaid, "invoice %d", want.ID)
		require.Equal(t, want.Overpaid, got.Overpaid, "invoice %d", want.ID)
		require.Equal(t, want.NeedsAttention, got.NeedsAttention, "invoice %d: a wrong asset flags it", want.ID)
	}
	for _, w := range m.WrongNetwork {
		got, err := st.GetInvoice(ctx, wrongIDs[w.DepositAddress])
		require.NoError(t, err)
		require.Equal(t, store.StatusPending, got.Status, "a wrong-network payment credits nothing")
		require.True(t, got.PaidWei.IsZero())
		require.True(t, got.NeedsAttention, "it flags the invoice")
		ps, err := st.ListPaymentsByInvoice(ctx, got.ID)
		require.NoError(t, err)
		require.Len(t, ps, 1, "the payment, not the refund's gas funding")
		require.True(t, ps[0].WrongNetwork)
		require.Equal(t, m.ChainID, ps[0].ChainID, "recorded on evmd, where it arrived")
		require.Equal(t, w.Amount, ps[0].AmountWei.String())
	}
	for d, id := range movedIDs {
		got, err := st.GetInvoice(ctx, id)
		require.NoError(t, err)
		require.Equal(t, store.StatusPending, got.Status, "%s: paid on the other chain, nothing on evmd", d)
		ps, err := st.ListPaymentsByInvoice(ctx, id)
		require.NoError(t, err)
		require.Empty(t, ps)
	}
}
