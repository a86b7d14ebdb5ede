package main

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
)

// With DATABASE_READ_URL the read API reads the replica: a block only the
// replica holds is served, the primary is not asked. (Two databases stand
// in for a primary and its replica; a real replica would hold the same
// rows, later.)
func TestReadAPI_WithReadReplica_ServedFromTheReplica(t *testing.T) {
	t.Parallel()
	primary, replica := pgtest.New(t), pgtest.New(t)
	b := store.Block{Number: 7, Hash: common.HexToHash("0x07"), ParentHash: common.HexToHash("0x06"),
		Timestamp: 1_700_000_000, GasLimit: 30_000_000, IndexedAt: time.Now().UTC()}
	require.NoError(t, replica.InsertBlocks(context.Background(), []store.Block{b}, nil))

	get := func(a *app) int {
		require.NoError(t, a.buildOps())
		rec := httptest.NewRecorder()
		a.mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/blocks/7", nil))
		return rec.Code
	}
	newApp := func(reads store.Store) *app {
		return &app{cfg: appConfig{roles: roleSet{roleGateway: true}, reads: reads}, st: primary,
			log: slog.New(slog.DiscardHandler), reg: prometheus.NewRegistry(), mux: http.NewServeMux()}
	}
	require.Equal(t, http.StatusOK, get(newApp(replica)), "served from the replica")
	require.Equal(t, http.StatusNotFound, get(newApp(nil)), "without a replica, from the primary")
}
