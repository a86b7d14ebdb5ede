package main

import (
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/sqlite/sqlitetest"
)

func TestArchive_MovesFinishedInvoicesPastRetention(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := sqlitetest.New(t)
	m := store.Merchant{APIKeyDigest: []byte{1}, APIKeyHash: "h", APIKeyPrefix: "p", WebhookSecretCiphertext: []byte{1},
		SettlementAddress: common.HexToAddress("0x70997970C51812dc3A010C7d01b50e0d17dc79C8"), CreatedAt: time.Now(), UpdatedAt: time.Now()}
	require.NoError(t, st.CreateMerchant(ctx, &m))
	mk := func(status string, age time.Duration) int64 {
		idx, err := st.NextDerivationIndex(ctx)
		require.NoError(t, err)
		var addr common.Address
		_, _ = rand.Read(addr[:])
		tok := make([]byte, 32)
		_, _ = rand.Read(tok)
		created := time.Now().Add(-age)
		inv := store.Invoice{MerchantID: m.ID, Status: status, ChainID: 1337, DepositAddress: addr, DerivationIndex: idx,
			LookupTokenHash: tok, ExpiresAt: created, CreatedAt: created, UpdatedAt: created, SweepStatus: store.SweepNone}
		require.NoError(t, st.CreateInvoice(ctx, &inv))
		return inv.ID
	}
	old := mk(store.StatusSettled, 400*24*time.Hour)
	recent := mk(store.StatusSettled, 24*time.Hour)
	pendingOld := mk(store.StatusConfirmed, 400*24*time.Hour)

	a := &app{st: st, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		cfg: appConfig{archiveAfter: 365 * 24 * time.Hour, archiveEvery: time.Hour}}
	done := make(chan error, 1)
	go func() { done <- a.runArchive(ctx) }()
	require.Eventually(t, func() bool {
		_, err := st.GetInvoice(ctx, old)
		return err != nil
	}, 10*time.Second, 20*time.Millisecond, "the settled invoice past retention is archived")
	cancel()
	require.NoError(t, <-done)
	for _, id := range []int64{recent, pendingOld} {
		_, err := st.GetInvoice(context.Background(), id)
		require.NoError(t, err, "invoice %d stays: too recent or not finished", id)
	}
}
