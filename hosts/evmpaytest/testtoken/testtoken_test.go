package testtoken_test

import (
	"context"
	"crypto/ecdsa"
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient/simulated"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/evmpaytest/simchain"
	"github.com/evmpay/evmpay/hosts/evmpaytest/testtoken"
)

var chainID = big.NewInt(1337)

type sim struct {
	t      *testing.T
	b      *simchain.Backend
	client simulated.Client
}

func newSim(t *testing.T, keys ...*ecdsa.PrivateKey) *sim {
	alloc := types.GenesisAlloc{}
	eth, _ := new(big.Int).SetString("1000000000000000000000", 10)
	for _, k := range keys {
		alloc[crypto.PubkeyToAddress(k.PublicKey)] = types.Account{Balance: eth}
	}
	b := simchain.New(t, alloc)
	return &sim{t: t, b: b, client: b.Client()}
}

// mined commits a block and requires every tx in it to have succeeded.
func (s *sim) mined(txs ...*types.Transaction) {
	s.t.Helper()
	s.b.Commit()
	for _, tx := range txs {
		r, err := s.client.TransactionReceipt(context.Background(), tx.Hash())
		require.NoError(s.t, err)
		require.Equal(s.t, types.ReceiptStatusSuccessful, r.Status, "tx %s reverted", tx.Hash())
	}
}

func (s *sim) failed(tx *types.Transaction) {
	s.t.Helper()
	s.b.Commit()
	r, err := s.client.TransactionReceipt(context.Background(), tx.Hash())
	require.NoError(s.t, err)
	require.Equal(s.t, types.ReceiptStatusFailed, r.Status)
}

func key(t *testing.T) (*ecdsa.PrivateKey, common.Address, *bind.TransactOpts) {
	k, err := crypto.GenerateKey()
	require.NoError(t, err)
	return k, crypto.PubkeyToAddress(k.PublicKey), bind.NewKeyedTransactor(k, chainID)
}

func balance(t *testing.T, tok *testtoken.Token, who common.Address) *big.Int {
	b, err := tok.BalanceOf(context.Background(), who)
	require.NoError(t, err)
	return b
}

func TestTokens_DeployMintTransfer_BalancesExact(t *testing.T) {
	ownerKey, _, owner := key(t)
	aliceKey, alice, aliceOpts := key(t)
	_, bob, _ := key(t)
	s := newSim(t, ownerKey, aliceKey)

	for _, deploy := range []func(*bind.TransactOpts, bind.ContractBackend) (*testtoken.Token, *types.Transaction, error){
		testtoken.DeployStable, testtoken.DeployTether,
	} {
		tok, tx, err := deploy(owner, s.client)
		require.NoError(t, err)
		s.mined(tx)
		t.Run(tok.Kind.Name, func(t *testing.T) {
			tx, err := tok.Mint(owner, alice, big.NewInt(12_500_000)) // 12.5 at 6 decimals
			require.NoError(t, err)
			s.mined(tx)
			tx, err = tok.Transfer(aliceOpts, bob, big.NewInt(2_500_001))
			require.NoError(t, err)
			s.mined(tx)
			require.Equal(t, big.NewInt(9_999_999), balance(t, tok, alice))
			require.Equal(t, big.NewInt(2_500_001), balance(t, tok, bob))

			// The receipt carries exactly one Transfer log with the amount.
			r, err := s.client.TransactionReceipt(context.Background(), tx.Hash())
			require.NoError(t, err)
			require.Len(t, r.Logs, 1)
			require.Equal(t, tok.Address, r.Logs[0].Address)
			require.Equal(t, testtoken.TransferTopic, r.Logs[0].Topics[0])
			require.Equal(t, common.BytesToHash(alice.Bytes()), r.Logs[0].Topics[1])
			require.Equal(t, common.BytesToHash(bob.Bytes()), r.Logs[0].Topics[2])
			require.Equal(t, big.NewInt(2_500_001), new(big.Int).SetBytes(r.Logs[0].Data))

			// Only the deployer mints.
			tx, err = tok.Mint(withGas(aliceOpts), alice, big.NewInt(1))
			require.NoError(t, err)
			s.failed(tx)
			// Overdrawing reverts (rather than returning false).
			tx, err = tok.Transfer(withGas(aliceOpts), bob, big.NewInt(10_000_000))
			require.NoError(t, err)
			s.failed(tx)
		})
	}
}

// withGas skips gas estimation, so a transaction that reverts is still sent.
func withGas(o *bind.TransactOpts) *bind.TransactOpts {
	c := *o
	c.GasLimit = 200_000
	return &c
}

func TestTether_Transfer_ReturnsNoBool(t *testing.T) {
	m, ok := testtoken.Tether.ABI.Methods["transfer"]
	require.True(t, ok)
	require.Empty(t, m.Outputs, "USDT-shaped transfer returns nothing")
	require.Empty(t, testtoken.Tether.ABI.Methods["transferFrom"].Outputs)
	require.Empty(t, testtoken.Tether.ABI.Methods["approve"].Outputs)
	_, hasPermit := testtoken.Tether.ABI.Methods["permit"]
	require.False(t, hasPermit)
	require.Len(t, testtoken.Stable.ABI.Methods["transfer"].Outputs, 1)
}

func TestStable_PermitSignedOffChain_SpenderMovesTokens(t *testing.T) {
	ownerKey, _, owner := key(t)
	depositKey, deposit, _ := key(t)
	sweeperKey, sweeper, sweeperOpts := key(t)
	_, merchant, _ := key(t)
	s := newSim(t, ownerKey, sweeperKey) // the deposit address holds no native coin
	ctx := context.Background()

	tok, tx, err := testtoken.DeployStable(owner, s.client)
	require.NoError(t, err)
	s.mined(tx)
	var dec []any
	require.NoError(t, bind.NewBoundContract(tok.Address, tok.Kind.ABI, s.client, s.client, s.client).
		Call(&bind.CallOpts{}, &dec, "decimals"))
	require.Equal(t, uint8(6), dec[0])

	tx, err = tok.Mint(owner, deposit, big.NewInt(42_000_000))
	require.NoError(t, err)
	s.mined(tx)

	nonce, err := tok.Nonce(ctx, deposit)
	require.NoError(t, err)
	head, err := s.client.HeaderByNumber(ctx, nil)
	require.NoError(t, err)
	deadline := new(big.Int).SetUint64(head.Time + 3600)
	p, err := tok.SignPermit(depositKey, chainID, sweeper, big.NewInt(42_000_000), nonce, deadline)
	require.NoError(t, err)

	tx1, err := tok.Permit(sweeperOpts, p)
	require.NoError(t, err)
	s.mined(tx1)
	allowed, err := tok.Allowance(ctx, deposit, sweeper)
	require.NoError(t, err)
	require.Equal(t, big.NewInt(42_000_000), allowed)

	tx2, err := tok.TransferFrom(sweeperOpts, deposit, merchant, big.NewInt(42_000_000))
	require.NoError(t, err)
	s.mined(tx2)
	require.Equal(t, big.NewInt(42_000_000), balance(t, tok, merchant))
	require.Zero(t, balance(t, tok, deposit).Sign())

	// A used permit cannot be replayed.
	tx3, err := tok.Permit(withGas(sweeperOpts), p)
	require.NoError(t, err)
	s.failed(tx3)
	// The deposit address never held native coin.
	bal, err := s.client.BalanceAt(ctx, deposit, nil)
	require.NoError(t, err)
	require.Zero(t, bal.Sign())
}
