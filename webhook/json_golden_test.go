package webhook

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files in testdata/")

// A webhook delivery's JSON in the deliveries API is pinned: a change is a
// visible diff of testdata/delivery.json (go test ./webhook -run Golden
// -update rewrites it).
func TestDeliveryJSON_Golden(t *testing.T) {
	at := time.Date(2026, 11, 23, 12, 0, 0, 123456000, time.UTC)
	status := 503
	next := at.Add(5 * time.Minute)
	d := store.Delivery{ID: 12, EventID: 34, MerchantID: 3, InvoiceID: 7, EventType: store.EventInvoicePaid,
		Status: store.DeliveryPending, ResponseStatus: &status, Attempt: 2, LastAttemptAt: &at, NextAttemptAt: &next,
		LastError: "http 503", CreatedAt: at.Add(-time.Minute), UpdatedAt: at}
	failed := d
	failed.ID, failed.Status, failed.Attempt, failed.NextAttemptAt = 13, store.DeliveryFailed, MaxAttempts, nil
	got, err := json.MarshalIndent([]deliveryView{view(d), view(failed)}, "", "  ")
	require.NoError(t, err)
	got = append(got, '\n')
	path := filepath.Join("testdata", "delivery.json")
	if *updateGolden {
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
}
