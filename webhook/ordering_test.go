package webhook_test

import (
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
	evmpayapi "github.com/evmpay/evmpay/store/api"
)

// One refund's events reach the endpoint in the order they were written,
// even with many requests to the endpoint at once (issue #32: a refund's
// refund.awaiting_destination arrived before its refund.created). Other
// subjects' events still go out concurrently.
func TestOrdering_OneSubjectsEventsArriveInOrder(t *testing.T) {
	t.Parallel()
	st := stores[0].open(t)
	clk, sec, secret := newClock(), &secrets{}, newSecret(t)
	rc := newReceiver(t, secret, clk.Now, func(_ int, w http.ResponseWriter, _ *http.Request) {
		time.Sleep(time.Duration(rand.IntN(4000)) * time.Microsecond) // answers in another order than asked
		w.WriteHeader(http.StatusNoContent)
	})
	m := newMerchant(t, st, sec, rc.URL, secret)
	const refunds = 12
	types := []string{store.EventRefundCreated, store.EventRefundAwaitingDestination, store.EventRefundAwaitingApproval,
		store.EventRefundCancelled}
	require.NoError(t, st.InTx(ctx, func(tx store.Tx) error {
		for i := range refunds {
			dest := common.Address{byte(i + 1)}
			o := store.Outbound{Kind: store.OutboundPayout, MerchantID: m.ID, Amount: store.NewAmount(uint64(1000 + i)),
				Destination: &dest, PaidBy: store.PaidByService, Status: store.OutboundQueued, CreatedAt: clk.Now(), UpdatedAt: clk.Now()}
			o.SetAsset(store.NativeAsset("ETH"))
			if err := tx.CreateOutbound(ctx, &o); err != nil {
				return err
			}
			for _, typ := range types {
				ev, err := evmpayapi.OutboundEvent(typ, o, clk.Now())
				if err != nil {
					return err
				}
				if err := tx.InsertEvent(ctx, &ev); err != nil {
					return err
				}
			}
		}
		return nil
	}))
	cfg := fastConfig(clk)
	cfg.Workers, cfg.PerEndpoint = 16, 16
	start(t, st, sec, cfg)
	require.Eventually(t, func() bool { return rc.count() == refunds*len(types) }, 20*time.Second, 5*time.Millisecond)

	seen := map[int64][]string{}
	for _, r := range rc.requests() {
		require.NoError(t, r.verified)
		var p struct {
			Type string `json:"type"`
			Data struct {
				ID int64 `json:"id"`
			} `json:"data"`
		}
		require.NoError(t, json.Unmarshal(r.body, &p))
		seen[p.Data.ID] = append(seen[p.Data.ID], p.Type)
	}
	require.Len(t, seen, refunds)
	for id, got := range seen {
		require.Equal(t, types, got, "outbound %d's events in the order they were written", id)
	}
}
