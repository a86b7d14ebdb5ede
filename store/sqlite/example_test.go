package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/api"
	"github.com/evmpay/evmpay/store/sqlite"
)

// Open creates and migrates the file; InTx commits a state change together
// with the event it emits, or neither.
func ExampleOpen() {
	dir, _ := os.MkdirTemp("", "evmpay-example-")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "evmpay.db"), sqlite.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()

	now := time.Now().UTC()
	m := store.Merchant{APIKeyDigest: []byte("digest"), APIKeyHash: "hash", WebhookSecretCiphertext: []byte("sealed"),
		SettlementAddress: common.HexToAddress("0x70997970C51812dc3A010C7d01b50e0d17dc79C8"), CreatedAt: now, UpdatedAt: now}
	if err := st.CreateMerchant(ctx, &m); err != nil {
		fmt.Println(err)
		return
	}

	var invoiceID int64
	err = st.InTx(ctx, func(tx store.Tx) error {
		idx, err := tx.NextDerivationIndex(ctx)
		if err != nil {
			return err
		}
		inv := store.Invoice{MerchantID: m.ID, Status: store.StatusPending, AmountWei: store.NewAmount(1000),
			ChainID: 1337, DepositAddress: common.HexToAddress("0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"),
			DerivationIndex: idx, LookupTokenHash: []byte("token-hash"), ExpiresAt: now.Add(15 * time.Minute),
			CreatedAt: now, UpdatedAt: now, SweepStatus: store.SweepNone}
		if err := tx.CreateInvoice(ctx, &inv); err != nil {
			return err
		}
		invoiceID = inv.ID
		ev, err := api.InvoiceEvent("invoice.created", inv, now, nil)
		if err != nil {
			return err
		}
		if err := tx.InsertEvent(ctx, &ev); err != nil {
			return err
		}
		return errors.New("changed my mind") // rolls back the invoice and its event
	})
	fmt.Println(err)
	_, err = st.GetInvoice(ctx, invoiceID)
	fmt.Println(errors.Is(err, store.ErrNotFound))
	idx, _ := st.NextDerivationIndex(ctx)
	fmt.Println("next index:", idx)
	// Output:
	// changed my mind
	// true
	// next index: 0
}
