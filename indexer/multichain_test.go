package indexer_test

import (
	"context"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/params"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/evmpaytest/simchain"
	"github.com/evmpay/evmpay/indexer"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
)

// Two chains, one database: two simulated chains of one genesis (so one
// genesis hash) and the same payer, each indexed by its own indexer
// through its own chain-bound handle, at once. Each chain's index holds
// that chain's blocks (the node's hashes) and transactions, at the same
// block numbers as the other's.
func TestIndexers_TwoChainsOneDatabase_EachIndexesItsOwn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	alloc := types.GenesisAlloc{crypto.PubkeyToAddress(key.PublicKey): {Balance: big.NewInt(params.Ether)}}
	to := common.Address{0x70}
	const blocks = 5

	type run struct {
		id uint64
		b  *simchain.Backend
		st store.Store
	}
	var runs []run
	for _, id := range []uint64{1337, 1338} {
		b := simchain.New(t, alloc, simchain.WithChainID(id))
		signer := types.LatestSignerForChainID(new(big.Int).SetUint64(id))
		for n := range blocks {
			tx := types.MustSignNewTx(key, signer, &types.DynamicFeeTx{ChainID: new(big.Int).SetUint64(id),
				Nonce: uint64(n), To: &to, Value: new(big.Int).SetUint64(id), Gas: 21000,
				GasTipCap: big.NewInt(params.GWei), GasFeeCap: big.NewInt(10 * params.GWei)})
			require.NoError(t, b.Client().SendTransaction(ctx, tx))
			b.Commit()
		}
		st := db.Chain(id)
		start(t, indexer.NewClientSource(b.Client()), st, indexer.Config{Backfill: true, ChainID: id})
		runs = append(runs, run{id, b, st})
	}
	g0, g1 := runs[0].st, runs[1].st
	for _, r := range runs {
		require.Eventually(t, func() bool {
			c, err := r.st.GetCursor(ctx, store.CursorIndexer)
			return err == nil && c.BlockNumber == blocks
		}, 60*time.Second, 10*time.Millisecond, "chain %d indexed to its head", r.id)
		for n := uint64(0); n <= blocks; n++ {
			want, err := r.b.Client().BlockByNumber(ctx, new(big.Int).SetUint64(n))
			require.NoError(t, err)
			got, err := r.st.GetBlock(ctx, n)
			require.NoError(t, err)
			require.Equal(t, want.Hash(), got.Hash, "chain %d block %d", r.id, n)
			if n == 0 {
				continue
			}
			txs, err := r.st.ListTxsByBlock(ctx, n)
			require.NoError(t, err)
			require.Len(t, txs, 1, "chain %d block %d: its own transaction only", r.id, n)
			require.Equal(t, new(big.Int).SetUint64(r.id).String(), txs[0].ValueWei.String())
		}
		id, err := r.st.GetChainIdentity(ctx)
		require.NoError(t, err)
		require.Equal(t, r.id, id.ChainID)
	}
	a, err := g0.GetBlock(ctx, 0)
	require.NoError(t, err)
	b, err := g1.GetBlock(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, a.Hash, b.Hash, "one genesis: the same block 0 hash, held once per chain")
	a, _ = g0.GetBlock(ctx, 1)
	b, _ = g1.GetBlock(ctx, 1)
	require.NotEqual(t, a.Hash, b.Hash, "block 1 differs: each chain's own transaction")
}
