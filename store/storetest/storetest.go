// Package storetest is the conformance suite every store.Store
// implementation runs:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store { return openFresh(t) })
//	}
//
// Each subtest gets a fresh, empty, migrated store from the factory.
package storetest

import (
	"context"
	"crypto/rand"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/api"
)

// test is one conformance test; each file of the suite lists its own.
type test struct {
	name string
	fn   func(t *testing.T, st store.Store)
}

// Factory returns a fresh, empty, migrated store for one test.
type Factory func(t *testing.T) store.Store

// Run runs the whole suite.
func Run(t *testing.T, newStore Factory) {
	var tests []test
	tests = append(tests, coreTests()...)
	tests = append(tests, invoiceTests()...)
	tests = append(tests, chainTests()...)
	tests = append(tests, identityTests()...)
	tests = append(tests, settlementTests()...)
	tests = append(tests, webhookTests()...)
	tests = append(tests, sweepTests()...)
	tests = append(tests, tokenTests()...)
	tests = append(tests, tokenSweepTests()...)
	tests = append(tests, brandingTests()...)
	tests = append(tests, fiatTests()...)
	tests = append(tests, outboundTests()...)
	tests = append(tests, dashboardTests()...)
	tests = append(tests, multiChainTests()...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newStore(t).Chain(ChainID))
		})
	}
}

// ChainID is the chain the suite's stores are bound to (store.Store.Chain).
const ChainID = 1337

var ctx = context.Background()

// now is a fixed time at microsecond precision, the precision both stores
// keep.
func now() time.Time {
	return time.Date(2026, 11, 21, 12, 0, 0, 123456000, time.UTC)
}

func randAddr() common.Address {
	var a common.Address
	_, _ = rand.Read(a[:])
	return a
}

func randHash() common.Hash {
	var h common.Hash
	_, _ = rand.Read(h[:])
	return h
}

func randBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func maxUint256() store.Amount {
	max := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))
	a, err := store.AmountFromBig(max)
	if err != nil {
		panic(err)
	}
	return a
}

func requireTime(t *testing.T, want, got time.Time) {
	t.Helper()
	require.Truef(t, want.Equal(got), "time: want %s, got %s", want, got)
}

func requireTimePtr(t *testing.T, want, got *time.Time) {
	t.Helper()
	if want == nil || got == nil {
		require.Equal(t, want == nil, got == nil, "time pointer nil-ness")
		return
	}
	requireTime(t, *want, *got)
}

func newMerchant(t testing.TB, st store.Tx) store.Merchant {
	t.Helper()
	m := store.Merchant{
		Name:                    "shop",
		APIKeyDigest:            randBytes(32),
		APIKeyHash:              "$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA",
		APIKeyPrefix:            "sk_test_abcd",
		WebhookURL:              "https://example.com/hook",
		WebhookSecretCiphertext: randBytes(60),
		SettlementAddress:       randAddr(),
		CreatedAt:               now(),
		UpdatedAt:               now(),
	}
	require.NoError(t, st.CreateMerchant(ctx, &m))
	require.NotZero(t, m.ID)
	return m
}

func newInvoice(t *testing.T, st store.Tx, merchantID int64, mutate ...func(*store.Invoice)) store.Invoice {
	t.Helper()
	idx, err := st.NextDerivationIndex(ctx)
	require.NoError(t, err)
	inv := store.Invoice{
		MerchantID:      merchantID,
		Status:          store.StatusPending,
		AmountWei:       store.MustParseAmount("1500000000000000000"),
		ChainID:         1337,
		DepositAddress:  randAddr(),
		DerivationIndex: idx,
		PaymentURI:      "ethereum:0x0@1337?value=1",
		LookupTokenHash: randBytes(32),
		ExpiresAt:       now().Add(15 * time.Minute),
		CreatedAt:       now(),
		UpdatedAt:       now(),
		SweepStatus:     store.SweepNone,
	}
	for _, f := range mutate {
		f(&inv)
	}
	require.NoError(t, st.CreateInvoice(ctx, &inv))
	require.NotZero(t, inv.ID)
	return inv
}

func newEvent(t *testing.T, st store.Tx, inv store.Invoice, typ string) store.Event {
	t.Helper()
	ev, err := api.InvoiceEvent(typ, inv, now(), nil)
	require.NoError(t, err)
	require.NoError(t, st.InsertEvent(ctx, &ev))
	require.NotZero(t, ev.ID)
	return ev
}
