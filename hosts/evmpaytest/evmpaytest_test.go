package evmpaytest_test

import (
	"context"
	"fmt"
	"math/big"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/evmpaytest"
	"github.com/evmpay/evmpay/hosts/evmpaytest/wait"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// recorder is a testing.TB whose Fatalf and Errorf record the failure
// instead of failing the test, so that the kit's failure messages can be
// checked. Everything else goes to the real test.
type recorder struct {
	testing.TB
	mu       sync.Mutex
	failures []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

// fails runs f as a test body would run (Fatalf ends its goroutine) and
// returns the first failure it reported, "" for none.
func (r *recorder) fails(f func()) string {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.failures) == 0 {
		return ""
	}
	return r.failures[0]
}

func TestChain_FundsTheTestMnemonicsAccountsAndMore(t *testing.T) {
	t.Parallel()
	extra := common.HexToAddress("0x00000000000000000000000000000000000000e1")
	c := evmpaytest.NewChain(t, evmpaytest.ChainConfig{Accounts: 2, Balance: big.NewInt(7), Fund: []common.Address{extra}})
	require.Len(t, c.Accounts(), 2)
	require.Equal(t, common.HexToAddress("0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"), c.Accounts()[0].Address)
	require.Equal(t, common.HexToAddress("0x70997970C51812dc3A010C7d01b50e0d17dc79C8"), c.Accounts()[1].Address)
	for _, a := range []common.Address{c.Accounts()[0].Address, c.Accounts()[1].Address, extra} {
		require.Equal(t, "7", c.Balance(nil, a).String(), "%s", a)
	}
	def := evmpaytest.NewChain(t, evmpaytest.ChainConfig{})
	require.Len(t, def.Accounts(), 3)
	require.Equal(t, "1000000000000000000000000", def.Balance(nil, def.Accounts()[2].Address).String())
}

// RPC, Source and Client are three views of one chain.
func TestChain_RPCSourceAndClientSeeTheSameChain(t *testing.T) {
	t.Parallel()
	c := evmpaytest.NewChain(t, evmpaytest.ChainConfig{})
	require.EqualValues(t, 0, c.Head())
	require.EqualValues(t, 2, c.Mine(2))
	var n hexutil.Uint64
	require.NoError(t, c.RPC().CallContext(context.Background(), &n, "eth_blockNumber"))
	require.EqualValues(t, 2, n)
	bs, err := c.Source().Blocks(context.Background(), 2, 1, false)
	require.NoError(t, err)
	b, err := c.Client().BlockByNumber(context.Background(), big.NewInt(2))
	require.NoError(t, err)
	require.Equal(t, b.Hash(), bs[0].Hash)
}

func TestChain_Pay_FailsWithWhatIsWrongWithTheURI(t *testing.T) {
	t.Parallel()
	r := &recorder{TB: t}
	c := evmpaytest.NewChain(r, evmpaytest.ChainConfig{})
	to := "0x00000000000000000000000000000000000000aa"
	for uri, want := range map[string]string{
		"ethereum:" + to + "@1?value=5":    "asks for chain 1, the simulated chain is 1337",
		"ethereum:" + to + "@1337":         "names no amount",
		"bitcoin:" + to:                    "invalid payment URI",
		"ethereum:" + to + "@1337?value=5": "",
	} {
		r.failures = nil
		require.Contains(t, r.fails(func() { c.Pay(uri) }), want, uri)
	}
	r.failures = nil
	require.Contains(t, r.fails(func() { c.PayFrom(c.Accounts()[1], "ethereum:"+to+"@1337?value=2000000000000000000000000") }),
		"the payment would fail (does 0x70997970C51812dc3A010C7d01b50e0d17dc79C8 hold the funds?)")
	require.Equal(t, "5", c.Balance(nil, common.HexToAddress(to)).String(), "only the good URI paid")
}

func TestEnv_WaitInvoice_FailsWithWhatItLastSaw(t *testing.T) {
	t.Parallel()
	r := &recorder{TB: t}
	env := evmpaytest.New(r, evmpaytest.Config{Wait: wait.Poll{Timeout: time.Second}})
	inv := env.CreateInvoice(`{"amount_wei":"250000"}`)
	msg := r.fails(func() { env.WaitInvoice(inv.ID, store.StatusSettled) }) // never paid
	// The last poll saw the invoice, or (on a loaded machine) evmpay still
	// catching up with the block it had just mined: either is said.
	require.Regexp(t, `^not within 1s: invoice 1 SETTLED; last seen: `+
		`(invoice 1 PENDING paid 0 of 250000 at block \d+|head \d+ 0x[0-9a-f]+, indexer at \d+, settlement at \d+); \d+ blocks mined$`, msg)
}

func TestEnv_Sync_FailsWhenNothingIndexes(t *testing.T) {
	t.Parallel()
	r := &recorder{TB: t}
	env := evmpaytest.New(r, evmpaytest.Config{NoServices: true, Wait: wait.Poll{Timeout: 100 * time.Millisecond}})
	env.Chain.Mine(1)
	require.Regexp(t, `^not within 100ms: the indexer and settlement at the chain's head; last seen: head 1 0x[0-9a-f]{8}, indexer at nowhere, settlement at nowhere$`,
		r.fails(env.Sync))
	require.Empty(t, env.URL, "no services")
	require.Nil(t, env.Invoices)
}

func TestEnv_CreateInvoice_FailsWithTheAPIsAnswer(t *testing.T) {
	t.Parallel()
	r := &recorder{TB: t}
	env := evmpaytest.New(r, evmpaytest.Config{})
	require.Regexp(t, `POST /v1/invoices \{"amount_wei":"-1"\}: 400 Bad Request: \{.*"code":"invalid_amount"`,
		r.fails(func() { env.CreateInvoice(`{"amount_wei":"-1"}`) }))
}

// The kit runs on any store: here PostgreSQL, the production store.
func TestEnv_OnPostgreSQL_InvoiceSettled(t *testing.T) {
	t.Parallel()
	env := evmpaytest.New(t, evmpaytest.Config{Store: pgtest.New(t), Confirmations: 2})
	inv := env.CreateInvoice(`{"amount_wei":"777"}`)
	env.Chain.Pay(inv.PaymentURI)
	got := env.WaitInvoice(inv.ID, store.StatusSettled)
	require.Equal(t, store.SweepSwept, got.SweepStatus)
	require.Equal(t, "777", env.Chain.Balance(nil, env.Merchant.SettlementAddress).String())
}

func TestOutput_Wait_ReturnsTheMatchOrFailsWithEverythingWritten(t *testing.T) {
	t.Parallel()
	var out evmpaytest.Output
	go fmt.Fprintln(&out, "listening on http://127.0.0.1:1234")
	require.Equal(t, []string{"on http://127.0.0.1:1234", "127.0.0.1:1234"}, out.Wait(t, `on http://(\S+)`))

	r := &recorder{TB: t}
	msg := r.fails(func() {
		wait.Poll{Timeout: 50 * time.Millisecond}.Until(r, "never", func() (bool, any) { return false, out.String() })
	})
	require.Equal(t, "not within 50ms: never; last seen: listening on http://127.0.0.1:1234\n", msg)
}
