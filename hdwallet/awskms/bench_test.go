package awskms_test

import (
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/evmpay/evmpay/hdwallet/awskms/kmstest"
)

// BenchmarkSignTx_KMSEmulator is the signing latency of one transaction
// through the AWS SDK against local-kms on loopback (HTTP, JSON, SigV4,
// DER → r, s, low-S, recovery id). Real KMS adds the network round trip
// to its region.
func BenchmarkSignTx_KMSEmulator(b *testing.B) {
	k := newSigner(b, kmstest.Start(b))
	to := common.HexToAddress("0x00000000000000000000000000000000000c0ffe")
	chainID := big.NewInt(1337)
	tx := types.NewTx(&types.DynamicFeeTx{ChainID: chainID, Nonce: 7, GasTipCap: big.NewInt(1e9),
		GasFeeCap: big.NewInt(3e9), Gas: 21_000, To: &to, Value: big.NewInt(1)})
	signer := types.LatestSignerForChainID(chainID)
	b.ResetTimer()
	for range b.N {
		if _, err := k.SignTx(ctx, tx, signer); err != nil {
			b.Fatal(err)
		}
	}
}
