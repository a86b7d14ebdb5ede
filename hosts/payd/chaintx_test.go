package main

import (
	"context"
	"crypto/ecdsa"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/stretchr/testify/require"
)

// The chain steps the end-to-end rigs (the dev chain's and evmd's) share.

// waitMined waits up to within for tx's receipt and requires success.
func waitMined(t *testing.T, ctx context.Context, eth *ethclient.Client, tx *types.Transaction, within time.Duration) *types.Receipt {
	t.Helper()
	var rc *types.Receipt
	waitUntil(t, within, 200*time.Millisecond, func() bool {
		var err error
		rc, err = eth.TransactionReceipt(ctx, tx.Hash())
		return err == nil
	}, func() string { return "transaction " + tx.Hash().Hex() + " never mined" })
	require.Equal(t, types.ReceiptStatusSuccessful, rc.Status, "transaction %s failed", tx.Hash().Hex())
	return rc
}

// sendNativeTx sends wei from key to to in a plain EIP-1559 transfer (fee
// cap: tip + twice the head's base fee) and waits for it.
func sendNativeTx(t *testing.T, ctx context.Context, eth *ethclient.Client, chainID uint64, key *ecdsa.PrivateKey,
	to common.Address, wei, tip *big.Int) *types.Receipt {
	t.Helper()
	nonce, err := eth.PendingNonceAt(ctx, crypto.PubkeyToAddress(key.PublicKey))
	require.NoError(t, err)
	head, err := eth.HeaderByNumber(ctx, nil)
	require.NoError(t, err)
	feeCap := new(big.Int).Add(tip, new(big.Int).Mul(head.BaseFee, big.NewInt(2)))
	tx, err := types.SignNewTx(key, types.LatestSignerForChainID(new(big.Int).SetUint64(chainID)),
		&types.DynamicFeeTx{Nonce: nonce, GasTipCap: tip, GasFeeCap: feeCap, Gas: 21000, To: &to, Value: wei})
	require.NoError(t, err)
	require.NoError(t, eth.SendTransaction(ctx, tx))
	return waitMined(t, ctx, eth, tx, 90*time.Second)
}
