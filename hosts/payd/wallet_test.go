package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// walletPayments is how many payments each wallet run sends and awaits.
const walletPayments = 200

// ethersNodePath installs ethers.js with the project's own script (once per
// machine) and returns the directory to hand to node as NODE_PATH.
func ethersNodePath(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(filepath.Join("..", "..", "scripts", "npm-tools.sh")).Output()
	var stderr string
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = string(ee.Stderr)
	}
	require.NoError(t, err, "scripts/npm-tools.sh: %s", stderr)
	return strings.TrimSpace(string(out))
}

// payWithEthers runs testdata/ethers_pay.cjs: walletPayments payments from
// dev-mnemonic account index, each sent and awaited as ethers.js and viem
// do; an error says which JSON-RPC call failed.
func payWithEthers(nodePath, rpcURL string, index int) error {
	cmd := exec.Command("node", filepath.Join("testdata", "ethers_pay.cjs"), rpcURL, strconv.Itoa(walletPayments), strconv.Itoa(index))
	cmd.Env = append(os.Environ(), "NODE_PATH="+nodePath)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("ethers.js against %s: %v: %s", rpcURL, err, out)
	}
	if !strings.Contains(string(out), `"mined":`+strconv.Itoa(walletPayments)+`,"errors":0`) {
		return fmt.Errorf("ethers.js against %s: %s", rpcURL, out)
	}
	return nil
}

// waitChainID polls url with eth_chainId every 20 ms until it answers 200.
func waitChainID(t *testing.T, url string) {
	t.Helper()
	require.Eventually(t, func() bool { return chainIDAnswers(url) }, 60*time.Second, 20*time.Millisecond,
		"%s never answered eth_chainId", url)
}

// chainIDAnswers reports whether url answers eth_chainId with 200.
func chainIDAnswers(url string) bool {
	resp, err := http.Post(url, "application/json",
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}`))
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// A wallet starting to pay the moment `payd devchain` answers, and one paying
// through `payd dev`'s chain port and its RPC proxy, never see an error from
// a receipt or transaction lookup ("transaction indexing is in progress").
// The first payment to `payd devchain` leaves well before its first block.
func TestDevChain_EthersPaymentsAwaited_NoLookupErrors(t *testing.T) {
	t.Parallel()
	nodePath := ethersNodePath(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	chainAddr := freeAddr(t)
	chainDone := make(chan error, 1)
	go func() {
		chainDone <- run(ctx, []string{"devchain", "--chain-rpc", chainAddr, "--block-time", "600ms"}, &syncBuffer{})
	}()
	waitChainID(t, "http://"+chainAddr)
	// The moment the chain answers, a lookup of a transaction it does not
	// know (one a wallet sent before a restart, say) is null, not an error.
	for _, method := range []string{"eth_getTransactionReceipt", "eth_getTransactionByHash"} {
		body, err := httpPostJSON("http://"+chainAddr,
			`{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":["0x`+strings.Repeat("ab", 32)+`"]}`)
		require.NoError(t, err)
		require.JSONEq(t, `{"jsonrpc":"2.0","id":1,"result":null}`, body, method)
	}

	httpAddr, proxyAddr, devChainAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	var devOut syncBuffer
	devDone := make(chan error, 1)
	go func() {
		devDone <- run(ctx, []string{"dev", "--http", httpAddr, "--rpc-proxy", proxyAddr, "--chain-rpc", devChainAddr,
			"--metrics", "", "--block-time", "300ms", "--data", t.TempDir()}, &devOut)
	}()

	// The payments run concurrently; their results are checked here, in
	// the test's goroutine, after every one has returned.
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs = map[string]error{}
	)
	pay := func(name, url string, index int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := payWithEthers(nodePath, url, index)
			mu.Lock()
			errs[name] = err
			mu.Unlock()
		}()
	}
	pay("devchain chain port", "http://"+chainAddr, 1)
	waitUntil(t, 120*time.Second, 20*time.Millisecond, func() bool {
		select {
		case err := <-devDone:
			wg.Wait()
			t.Fatalf("payd dev stopped: %v\n%s", err, devOut.String())
		default:
		}
		return chainIDAnswers("http://" + proxyAddr)
	}, func() string { return "payd dev's RPC proxy never answered eth_chainId:\n" + devOut.String() })
	pay("dev chain port", "http://"+devChainAddr, 2)
	pay("dev RPC proxy", "http://"+proxyAddr, 3)
	wg.Wait()
	for name, err := range errs {
		require.NoError(t, err, name)
	}

	cancel()
	for _, done := range []chan error{chainDone, devDone} {
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Fatal("payd did not stop within 30 s of cancellation")
		}
	}
}
