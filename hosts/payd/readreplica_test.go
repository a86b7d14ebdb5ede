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
	"github.com/evmpay/evmpay/store/httpapi"
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
			log: slog.New(slog.DiscardHandler), reg: prometheus.NewRegistry(), mux: httpapi.NewMux(), metricsMux: httpapi.NewMux()}
	}
	require.Equal(t, http.StatusOK, get(newApp(replica)), "served from the replica")
	require.Equal(t, http.StatusNotFound, get(newApp(nil)), "without a replica, from the primary")
}

// A DATABASE_READ_URL that is not a replica of the primary — an empty
// database, or one holding another chain — is refused at start with the
// reason, and /readyz answers 503 "read_replica":"mismatch" once the
// replica stops matching (the read API would answer wrongly).
func TestReadReplica_EmptyOrAnotherChain_RefusedAtStartAndNotReady(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary := pgtest.New(t)
	id := store.ChainIdentity{ChainID: 1337, GenesisNumber: 0, GenesisHash: common.HexToHash("0xaa"), RecordedAt: time.Now()}
	_, err := primary.RecordChainIdentity(ctx, id)
	require.NoError(t, err)

	empty := pgtest.New(t)
	_, err = empty.DB().ExecContext(ctx, `DROP TABLE schema_migrations`)
	require.NoError(t, err)
	require.ErrorIs(t, checkReplica(ctx, primary, empty), errReplica)
	require.ErrorContains(t, checkReplica(ctx, primary, empty), "empty database")

	other := pgtest.New(t)
	_, err = other.RecordChainIdentity(ctx, store.ChainIdentity{ChainID: 1337, GenesisHash: common.HexToHash("0xbb"), RecordedAt: time.Now()})
	require.NoError(t, err)
	require.ErrorContains(t, checkReplica(ctx, primary, other), "holds chain 1337 (first block 0 0x00000000000000000000000000000000000000000000000000000000000000bb)")

	fresh := pgtest.New(t) // migrated, nothing recorded: not a replica of this primary
	require.ErrorContains(t, checkReplica(ctx, primary, fresh), "holds no chain identity")

	same := pgtest.New(t)
	_, err = same.RecordChainIdentity(ctx, id)
	require.NoError(t, err)
	require.NoError(t, checkReplica(ctx, primary, same))

	// Readiness: the check runs on every /readyz.
	ready := func(reads store.Store) string {
		a := &app{cfg: appConfig{reads: reads}, st: primary, log: slog.New(slog.DiscardHandler)}
		return a.replicaReadiness(ctx)
	}
	require.Equal(t, "ok", ready(same))
	require.Equal(t, "mismatch", ready(other))
	require.Equal(t, "mismatch", ready(empty))
	require.Equal(t, "", ready(nil), "no replica, no check")
}
