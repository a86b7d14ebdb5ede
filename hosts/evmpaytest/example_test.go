package evmpaytest_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/holiman/uint256"

	"github.com/evmpay/evmpay/hosts/evmpaytest"
	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/store"
)

// An invoice created through the invoice API, paid on the simulated chain,
// confirmed, and swept to the merchant. In a test, pass New the test's *testing.T.
func Example() {
	t := &exampleT{}
	defer t.done()

	env := evmpaytest.New(t, evmpaytest.Config{Confirmations: 3})
	inv := env.CreateInvoice(`{"amount_wei":"250000000000000000","order_id":"A-1"}`)
	fmt.Println("created:", inv.Status, inv.AmountWei, "wei")

	receipt := env.Chain.Pay(inv.PaymentURI)
	fmt.Println("paid in block", receipt.BlockNumber, "by", env.Chain.Accounts()[0].Address)
	paid := env.WaitInvoice(inv.ID, store.StatusPaid)
	fmt.Println(paid.Status, paid.PaidWei, "wei")

	settled := env.WaitInvoice(inv.ID, store.StatusSettled)
	fmt.Println(settled.Status, settled.SweepStatus, "- the merchant holds",
		env.Chain.Balance(nil, env.Merchant.SettlementAddress), "wei")
	// Output:
	// created: PENDING 250000000000000000 wei
	// paid in block 1 by 0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266
	// PAID 250000000000000000 wei
	// SETTLED SWEPT - the merchant holds 250000000000000000 wei
}

// Pay pays an ERC-20 transfer URI (EIP-681) from the first funded account,
// which DeployToken gave a million tokens.
func ExampleChain_Pay() {
	t := &exampleT{}
	defer t.done()

	chain := evmpaytest.NewChain(t, evmpaytest.ChainConfig{})
	usdc := chain.DeployToken("USDC", 6)
	shop := common.HexToAddress("0x00000000000000000000000000000000000000aa")
	uri, _ := invoice.FormatTransferURI(invoice.TransferURI{Token: usdc.Address, ChainID: evmpaytest.ChainID,
		To: shop, Amount: uint256.NewInt(12_500_000)})
	receipt := chain.Pay(uri)
	fmt.Println("status", receipt.Status, "in block", receipt.BlockNumber)
	fmt.Println("the shop holds", chain.Balance(&usdc.Address, shop), "base units")
	fmt.Println("the payer holds", chain.Balance(&usdc.Address, chain.Accounts()[0].Address), "base units")
	// Output:
	// status 1 in block 3
	// the shop holds 12500000 base units
	// the payer holds 999987500000 base units
}

// exampleT stands in for the *testing.T a test passes: it panics when the
// kit fails, and runs the kit's cleanups when done is called.
type exampleT struct {
	testing.TB // the methods the kit does not call
	cleanups   []func()
}

func (t *exampleT) Helper()                           {}
func (t *exampleT) Log(...any)                        {}
func (t *exampleT) Logf(string, ...any)               {}
func (t *exampleT) Errorf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (t *exampleT) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (t *exampleT) Cleanup(f func())                  { t.cleanups = append(t.cleanups, f) }

func (t *exampleT) TempDir() string {
	dir, err := os.MkdirTemp("", "evmpaytest-example-")
	if err != nil {
		panic(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func (t *exampleT) done() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}
