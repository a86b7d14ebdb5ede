package pkcs11key_test

import (
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hdwallet/pkcs11key"
	"github.com/evmpay/evmpay/hdwallet/pkcs11key/softhsmtest"
)

func benchTx() (*types.Transaction, types.Signer) {
	to := common.HexToAddress("0x00000000000000000000000000000000000c0ffe")
	chainID := big.NewInt(1337)
	return types.NewTx(&types.DynamicFeeTx{ChainID: chainID, Nonce: 7, GasTipCap: big.NewInt(1e9),
		GasFeeCap: big.NewInt(3e9), Gas: 21_000, To: &to, Value: big.NewInt(1)}), types.LatestSignerForChainID(chainID)
}

// BenchmarkSignTx_SoftHSM is the signing latency of one transaction in a
// SoftHSM2 token (CKM_ECDSA, low-S, recovery id), BenchmarkSignTx_InMemory
// the same transaction with an in-memory key, for comparison in one run.
func BenchmarkSignTx_SoftHSM(b *testing.B) {
	tok, err := pkcs11key.Open(softhsmtest.New(b).Config())
	require.NoError(b, err)
	defer tok.Close()
	k, err := tok.GenerateKey(ctx, "bench")
	require.NoError(b, err)
	tx, signer := benchTx()
	b.ResetTimer()
	for range b.N {
		if _, err := k.SignTx(ctx, tx, signer); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSignTx_InMemory(b *testing.B) {
	key, err := crypto.GenerateKey()
	require.NoError(b, err)
	tx, signer := benchTx()
	b.ResetTimer()
	for range b.N {
		if _, err := types.SignTx(tx, signer, key); err != nil {
			b.Fatal(err)
		}
	}
}
