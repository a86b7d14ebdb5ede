package postgres_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store/postgres/pgtest"
)

// The ledger is append-only in the database itself: an UPDATE or DELETE
// of an entry is refused, whatever code issues it.
func TestLedger_AppendOnly_UpdateAndDeleteRefused(t *testing.T) {
	st := pgtest.New(t)
	_, err := st.DB().Exec(`INSERT INTO ledger_entries (chain_id, kind, amount, at, recorded_at) VALUES (1337, 'opening_balance', 5, now(), now())`)
	require.NoError(t, err)
	_, err = st.DB().Exec(`UPDATE ledger_entries SET amount = 6`)
	require.ErrorContains(t, err, "append-only")
	_, err = st.DB().Exec(`DELETE FROM ledger_entries`)
	require.ErrorContains(t, err, "append-only")
	var amount string
	require.NoError(t, st.DB().Get(&amount, `SELECT amount::text FROM ledger_entries`))
	require.Equal(t, "5", amount)
}
