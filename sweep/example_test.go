package sweep_test

import (
	"context"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/evmpay/evmpay/hdwallet"
	"github.com/evmpay/evmpay/hosts/evmpaytest/simchain"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/sqlite"
	"github.com/evmpay/evmpay/sweep"
)

// A confirmed invoice is swept to the merchant's settlement address: the
// sweep wallet funds the deposit address with the gas, the deposit address
// sends exactly what the payer paid, and after the confirmations the
// invoice is SETTLED.
func Example() {
	ctx := context.Background()
	m, _ := hdwallet.ParseMnemonic("test test test test test test test test test test test junk")
	deposits, _ := hdwallet.NewWallet(m, "")
	sweepKey, _ := deposits.SweepKey()
	payerKey, _ := crypto.GenerateKey()
	payer := crypto.PubkeyToAddress(payerKey.PublicKey)
	oneEther := new(big.Int).Exp(big.NewInt(10), big.NewInt(18), nil)

	// go-ethereum's simulated backend, whose Commit returns once the
	// node's transaction pool is at the new block (simchain): the sweep
	// sends from the deposit address right after the block that funds it.
	chain := simchain.NewBackend(types.GenesisAlloc{
		payer: {Balance: new(big.Int).Mul(big.NewInt(100), oneEther)},
		crypto.PubkeyToAddress(sweepKey.PublicKey): {Balance: oneEther},
	})
	defer chain.Close()
	dir, _ := os.MkdirTemp("", "sweep-example")
	defer os.RemoveAll(dir)
	db, err := sqlite.Open(ctx, filepath.Join(dir, "evmpay.db"), sqlite.Config{})
	if err != nil {
		panic(err)
	}
	defer db.Close()
	st := db.Chain(1337) // the sweep reads this chain's index

	// A merchant and an invoice that settlement has confirmed.
	now := time.Now().UTC()
	merchant := store.Merchant{Name: "shop", APIKeyDigest: []byte{1}, APIKeyHash: "h", WebhookSecretCiphertext: []byte{1},
		SettlementAddress: common.HexToAddress("0x5e77"),
		CreatedAt:         now, UpdatedAt: now}
	if err := st.CreateMerchant(ctx, &merchant); err != nil {
		panic(err)
	}
	deposit, _ := deposits.Address(0)
	inv := store.Invoice{MerchantID: merchant.ID, Status: store.StatusConfirmed, AmountWei: store.NewAmount(25e16),
		PaidWei: store.NewAmount(25e16), ChainID: 1337, DepositAddress: deposit, DerivationIndex: 0,
		LookupTokenHash: []byte{1}, ExpiresAt: now, CreatedAt: now, UpdatedAt: now, SweepStatus: store.SweepQueued}
	if err := st.InTx(ctx, func(tx store.Tx) error {
		if _, err := tx.NextDerivationIndex(ctx); err != nil {
			return err
		}
		return tx.CreateInvoice(ctx, &inv)
	}); err != nil {
		panic(err)
	}
	// The payer's 0.25 ETH.
	pay, _ := types.SignNewTx(payerKey, types.LatestSignerForChainID(big.NewInt(1337)), &types.DynamicFeeTx{
		ChainID: big.NewInt(1337), GasTipCap: big.NewInt(1e9), GasFeeCap: big.NewInt(1e10), Gas: 21000,
		To: &deposit, Value: big.NewInt(25e16)})
	_ = chain.Client().SendTransaction(ctx, pay)
	chain.Commit()

	s, err := sweep.New(st, chain.Client(), sweep.Keys{
		Deposits: deposits,
		Wallet:   sweep.NewKeySigner(sweepKey),
	}, sweep.Config{Confirmations: 3})
	if err != nil {
		panic(err)
	}
	for range 6 { // a pass per block, as Run does
		if err := s.RunOnce(ctx); err != nil {
			panic(err)
		}
		got, _ := st.GetInvoice(ctx, inv.ID)
		fmt.Println(got.Status, got.SweepStatus)
		chain.Commit()
	}
	got, _ := st.GetInvoice(ctx, inv.ID)
	received, _ := chain.Client().BalanceAt(ctx, merchant.SettlementAddress, nil)
	fmt.Println("swept:", got.SweptWei, "merchant received:", received)
	// Output:
	// CONFIRMED FUNDING
	// CONFIRMED SENT
	// CONFIRMED SENT
	// CONFIRMED SENT
	// CONFIRMED SENT
	// SETTLED SWEPT
	// swept: 250000000000000000 merchant received: 250000000000000000
}
