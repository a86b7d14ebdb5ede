package sweep

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/stretchr/testify/require"
)

// TestClassify_RealNodeErrors sends bad transactions to a real go-ethereum
// node (the simulated backend, through JSON-RPC) and checks what each of
// its answers means to the sweeper.
func TestClassify_RealNodeErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	signer := types.LatestSignerForChainID(big.NewInt(1337))
	payer := crypto.PubkeyToAddress(e.payerKey.PublicKey)
	to := randAddr()
	head, err := e.client.HeaderByNumber(ctx, nil)
	require.NoError(t, err)
	feeCap := new(big.Int).Add(new(big.Int).Mul(head.BaseFee, big.NewInt(2)), big.NewInt(params1Gwei))
	tx := func(key any, nonce uint64, tip, cap *big.Int, gas uint64, value *big.Int) *types.Transaction {
		t.Helper()
		k := e.payerKey
		if key != nil {
			k = key.(*ecdsaKey).k
		}
		signed, err := types.SignNewTx(k, signer, &types.DynamicFeeTx{ChainID: big.NewInt(1337), Nonce: nonce,
			GasTipCap: tip, GasFeeCap: cap, Gas: gas, To: &to, Value: value})
		require.NoError(t, err)
		return signed
	}
	tip := big.NewInt(params1Gwei)
	send := func(tx *types.Transaction) error { return e.client.SendTransaction(ctx, tx) }

	nonce, err := e.client.PendingNonceAt(ctx, payer)
	require.NoError(t, err)
	mined := tx(nil, nonce, tip, feeCap, 21000, big.NewInt(1))
	require.NoError(t, send(mined))
	e.sim.Commit() // returns once the pool has dropped the mined transaction (simchain)
	nonce++

	pending := tx(nil, nonce, tip, feeCap, 21000, big.NewInt(1))
	require.NoError(t, send(pending))
	fivePercent := func(x *big.Int) *big.Int {
		return new(big.Int).Div(new(big.Int).Mul(x, big.NewInt(105)), big.NewInt(100))
	}
	poor, err := crypto.GenerateKey()
	require.NoError(t, err)
	belowBase := new(big.Int).Div(head.BaseFee, big.NewInt(4))

	cases := []struct {
		name   string
		err    error
		want   class
		reason string
	}{
		{"already known", send(pending), classAlreadyKnown, ""},
		{"nonce too low", send(tx(nil, nonce-1, tip, feeCap, 21000, big.NewInt(2))), classNonceTooLow, ""},
		{"replacement transaction underpriced",
			send(tx(nil, nonce, fivePercent(tip), fivePercent(feeCap), 21000, big.NewInt(1))), classReplacementUnderpriced, ""},
		{"insufficient funds for gas * price + value",
			send(tx(&ecdsaKey{poor}, 0, tip, feeCap, 21000, big.NewInt(1))), classInsufficientFunds, ""},
		{"tip below the pool's minimum", send(tx(nil, nonce+1, big.NewInt(0), feeCap, 21000, big.NewInt(1))), classUnderpriced, ""},
		{"intrinsic gas too low", send(tx(nil, nonce+1, tip, feeCap, 20000, big.NewInt(1))), classRejected,
			"rejected by node: intrinsic gas too low"},
		{"tip above fee cap", send(tx(nil, nonce+1, feeCap, tip, 21000, big.NewInt(1))), classRejected,
			"rejected by node: max priority fee per gas higher than max fee per gas"},
		// go-ethereum accepts a fee cap below the base fee and keeps the
		// transaction until the base fee falls (Cosmos EVM nodes may keep
		// it for ever): hence replacements of transactions not mined.
		{"fee cap below the base fee is accepted", send(tx(nil, nonce+1, big.NewInt(1), belowBase, 21000, big.NewInt(1))), classOK, ""},
		// A gap is queued, not refused.
		{"nonce gap is accepted", send(tx(nil, nonce+5, tip, feeCap, 21000, big.NewInt(1))), classOK, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, classify(c.err), "node answered %v", c.err)
			if c.reason != "" {
				require.Equal(t, c.reason, rejectedReason(c.err))
			}
		})
	}

	t.Run("no answer", func(t *testing.T) {
		dead, err := ethclient.Dial("http://127.0.0.1:1")
		require.NoError(t, err)
		defer dead.Close()
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		err = dead.SendTransaction(cctx, pending)
		require.Error(t, err)
		require.Equal(t, classTransient, classify(err))
	})
}

type ecdsaKey struct{ k *ecdsa.PrivateKey }

// rpcError is an error as go-ethereum's RPC client returns it for a
// JSON-RPC error response.
type rpcError struct{ msg string }

func (e rpcError) Error() string  { return e.msg }
func (e rpcError) ErrorCode() int { return -32000 }

// TestClassify_CosmosEVMMessages covers the messages of Cosmos EVM
// (Ethermint) nodes, which differ from go-ethereum's.
func TestClassify_CosmosEVMMessages(t *testing.T) {
	t.Parallel()
	for msg, want := range map[string]class{
		"tx already in mempool":                                                              classAlreadyKnown,
		"invalid nonce; got 3, expected 4: invalid sequence":                                 classNonceTooLow,
		"invalid nonce; got 9, expected 4: invalid sequence":                                 classNonceTooHigh,
		"insufficient fee; got: 100 required: 2000: insufficient fee":                        classUnderpriced,
		"provided fee < minimum global fee (10aevmos < 20aevmos)":                            classUnderpriced,
		"max fee per gas less than block base fee: address 0x1, maxFeePerGas: 1, baseFee: 7": classUnderpriced,
		"insufficient funds for gas * price + value: address 0x1 have 0 want 21000":          classInsufficientFunds,
		"replacement transaction underpriced":                                                classReplacementUnderpriced,
		"mempool is full":                                                                    classTransient,
		"tx intrinsic gas too low":                                                           classRejected,
	} {
		require.Equal(t, want, classify(rpcError{msg}), msg)
	}
	require.Equal(t, classTransient, classify(fmt.Errorf("post: %w", errors.New("connection reset by peer"))))
	require.Equal(t, classTransient, classify(context.DeadlineExceeded))
	require.Equal(t, classOK, classify(nil))
	require.Equal(t, "rejected by node: transaction refused", rejectedReason(rpcError{"weird: 0xdeadbeef has 5"}))
}
