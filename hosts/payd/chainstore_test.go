package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres"
)

// onRecordedChain binds st, opened on a payd's database, to the one chain
// that database holds (payd records its chain's identity at start): the
// test reads that chain's index.
func onRecordedChain(t *testing.T, st *postgres.Store) store.Store {
	t.Helper()
	var ids []uint64
	require.NoError(t, st.DB().Select(&ids, `SELECT chain_id FROM chain_identity`))
	require.Len(t, ids, 1, "the database holds one chain")
	return st.Chain(ids[0])
}
