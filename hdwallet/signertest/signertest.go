// Package signertest is the conformance suite of account signers held
// outside the process (hdwallet/pkcs11key, hdwallet/awskms): every such
// signer runs it, as every store runs storetest.
package signertest

import (
	"context"
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient/simulated"
	"github.com/stretchr/testify/require"
)

// Signer is what the suite exercises: sweep.AccountSigner plus the raw
// digest signature.
type Signer interface {
	Address() common.Address
	SignTx(ctx context.Context, tx *types.Transaction, signer types.Signer) (*types.Transaction, error)
	SignHash(ctx context.Context, hash common.Hash) ([]byte, error)
}

var halfN = new(big.Int).Rsh(crypto.S256().Params().N, 1)

// MinedOnSimulatedChain: the signer signs EIP-1559 transactions that a real
// EVM (go-ethereum's simulated backend) accepts and mines, from the
// signer's address.
func MinedOnSimulatedChain(t *testing.T, k Signer) {
	t.Helper()
	ctx := context.Background()
	sim := simulated.NewBackend(types.GenesisAlloc{k.Address(): {Balance: big.NewInt(1e18)}})
	t.Cleanup(func() { _ = sim.Close() })
	client := sim.Client()
	chainID, err := client.ChainID(ctx)
	require.NoError(t, err)
	signer := types.LatestSignerForChainID(chainID)
	head, err := client.HeaderByNumber(ctx, nil)
	require.NoError(t, err)
	to := common.HexToAddress("0x00000000000000000000000000000000000c0ffe")
	var hashes []common.Hash
	for nonce := range uint64(8) {
		tx := types.NewTx(&types.DynamicFeeTx{ChainID: chainID, Nonce: nonce, GasTipCap: big.NewInt(1e9),
			GasFeeCap: new(big.Int).Add(new(big.Int).Mul(head.BaseFee, big.NewInt(2)), big.NewInt(1e9)),
			Gas:       21_000, To: &to, Value: big.NewInt(int64(1000 + nonce))})
		signed, err := k.SignTx(ctx, tx, signer)
		require.NoError(t, err)
		from, err := types.Sender(signer, signed)
		require.NoError(t, err)
		require.Equal(t, k.Address(), from)
		require.NoError(t, client.SendTransaction(ctx, signed))
		hashes = append(hashes, signed.Hash())
	}
	// The pool promotes what it was sent on a goroutine of its own, and a
	// block sealed before it has holds only what is pending: wait until
	// the pool's pending nonce counts all eight.
	require.Eventually(t, func() bool {
		n, err := client.PendingNonceAt(ctx, k.Address())
		return err == nil && n == uint64(len(hashes))
	}, time.Minute, time.Millisecond, "the pool made all %d transactions pending", len(hashes))
	sim.Commit()
	for _, h := range hashes {
		r, err := client.TransactionReceipt(ctx, h)
		require.NoError(t, err, "mined: %s", h.Hex())
		require.Equal(t, types.ReceiptStatusSuccessful, r.Status)
	}
	bal, err := client.BalanceAt(ctx, to, nil)
	require.NoError(t, err)
	require.Equal(t, int64(8*1000+28), bal.Int64(), "every transfer arrived")
}

// LowSAndRecoverable: over n digests, every signature has s in the low
// half of the curve order (about half are high before normalisation) and a
// V that recovers the signer's key, and both V values occur.
func LowSAndRecoverable(t *testing.T, k Signer, n int) {
	t.Helper()
	vs := map[byte]int{}
	for i := range n {
		h := crypto.Keccak256Hash([]byte(fmt.Sprint("digest ", i)))
		sig, err := k.SignHash(context.Background(), h)
		require.NoError(t, err)
		require.Len(t, sig, 65)
		require.LessOrEqual(t, new(big.Int).SetBytes(sig[32:64]).Cmp(halfN), 0, "s is low")
		pub, err := crypto.SigToPub(h[:], sig)
		require.NoError(t, err)
		require.Equal(t, k.Address(), crypto.PubkeyToAddress(*pub))
		vs[sig[64]]++
	}
	require.Len(t, vs, 2, "both recovery ids occur over %d signatures: %v", n, vs)
}
