package settlement_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/evmpay/evmpay/settlement"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/sqlite"
)

// A Settler follows what the indexer wrote to the database and turns
// payments to deposit addresses into invoice state and events.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "settlement-example")
	defer os.RemoveAll(dir)
	db, err := sqlite.Open(ctx, filepath.Join(dir, "evmpay.db"), sqlite.Config{})
	if err != nil {
		panic(err)
	}
	defer db.Close()
	st := db.Chain(1337) // settlement reads and writes this chain's index
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

	// An invoice, as the invoice API creates it.
	m := store.Merchant{Name: "shop", APIKeyDigest: []byte{1}, APIKeyHash: "h", APIKeyPrefix: "sk",
		WebhookSecretCiphertext: []byte{1}, CreatedAt: now, UpdatedAt: now}
	must(st.CreateMerchant(ctx, &m))
	deposit := common.HexToAddress("0x00000000000000000000000000000000000000d1")
	inv := store.Invoice{MerchantID: m.ID, Status: store.StatusPending, AmountWei: store.MustParseAmount("1000000000000000000"),
		ChainID: 1337, DepositAddress: deposit, PaymentURI: "ethereum:" + deposit.Hex() + "@1337?value=1e18",
		LookupTokenHash: []byte{1}, ExpiresAt: now.Add(15 * time.Minute), CreatedAt: now, UpdatedAt: now,
		SweepStatus: store.SweepNone}
	must(st.CreateInvoice(ctx, &inv))

	// Blocks and a payment, as the indexer writes them.
	var parent common.Hash
	for n := uint64(0); n <= 12; n++ {
		b := store.Block{Number: n, Hash: common.Hash{0xb1, byte(n)}, ParentHash: parent, IndexedAt: now}
		var txs []store.Transaction
		if n == 0 {
			txs = append(txs, store.Transaction{Hash: common.HexToHash("0xaa"), BlockNumber: 0, BlockHash: b.Hash,
				From: common.HexToAddress("0xc0ffee"), To: &deposit, ValueWei: inv.AmountWei, Input: []byte{}})
		}
		must(st.InsertBlocks(ctx, []store.Block{b}, txs))
		parent = b.Hash
	}

	s, err := settlement.New(st, settlement.Config{Now: func() time.Time { return now }})
	if err != nil {
		panic(err)
	}
	// Run(ctx) polls every 1.5 s until ctx is cancelled; Sync settles once.
	must(s.Sync(ctx))

	got, _ := st.GetInvoice(ctx, inv.ID)
	fmt.Println(got.Status, got.SweepStatus, got.PaidWei)
	evs, _ := st.ListEventsByInvoice(ctx, inv.ID)
	for _, e := range evs {
		fmt.Println(e.Type)
	}
	// Output:
	// CONFIRMED QUEUED 1000000000000000000
	// invoice.paid
	// invoice.confirmed
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}
