package main

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hdwallet"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
)

// defaultAddrs are the listen addresses payd binds when none is given: a
// newcomer's `payd dev` holds them while `make test` runs beside it.
var defaultAddrs = []string{"127.0.0.1:8080", "127.0.0.1:8545", "127.0.0.1:8546", "127.0.0.1:9464"}

// TestMain holds payd's default ports for the whole run, as a running
// `payd dev` would: a test that binds one, instead of a port the OS picks,
// fails every time, not only beside `payd dev`. A port another process
// holds at the start (a `payd dev`, another suite) is taken as soon as it
// is freed.
func TestMain(m *testing.M) {
	go holdDefaultPorts()
	pgtest.Main(m)
}

// holdDefaultPorts binds every default port it can, and keeps trying the
// others.
func holdDefaultPorts() {
	held := map[string]bool{}
	for {
		for _, addr := range defaultAddrs {
			if held[addr] {
				continue
			}
			if l, err := net.Listen("tcp", addr); err == nil {
				held[addr] = true
				heldPorts = append(heldPorts, l)
			}
		}
		if len(held) == len(defaultAddrs) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// heldPorts are the default ports this process holds.
var heldPorts []net.Listener

// Every default port is taken while the tests run (by TestMain, or by a
// `payd dev` someone runs beside them): no test can rely on one.
func TestSuite_HoldsTheDefaultPorts(t *testing.T) {
	for _, addr := range defaultAddrs {
		// Another process may hand a port over to the holder just now.
		waitUntil(t, 10*time.Second, 50*time.Millisecond, func() bool {
			l, err := net.Listen("tcp", addr)
			if err == nil {
				l.Close()
			}
			return err != nil
		}, func() string { return addr + " is free during the tests" })
	}
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// paydBinary builds payd once for the tests that run it as processes.
func paydBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "payd-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "payd")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v: %s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return binPath
}

// process is a payd process whose output the test keeps.
type process struct {
	name string
	cmd  *exec.Cmd
	out  syncBuffer
}

func startProcess(t *testing.T, name string, env []string, args ...string) *process {
	t.Helper()
	return startProcessFor(t, t, name, env, args...)
}

// startProcessFor is startProcess for a subtest t whose process lives as
// long as the test life: a failure to start stops t, and the process is
// stopped when life ends.
func startProcessFor(t, life *testing.T, name string, env []string, args ...string) *process {
	t.Helper()
	p := &process{name: name, cmd: exec.Command(paydBinary(t), args...)}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout = &p.out
	p.cmd.Stderr = &p.out
	require.NoError(t, p.cmd.Start())
	t = life
	t.Cleanup(func() {
		if p.cmd.ProcessState != nil {
			return // the test waited for it to exit
		}
		_ = p.cmd.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- p.cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil && !t.Failed() {
				t.Errorf("%s did not exit cleanly on SIGINT: %v\n%s", p.name, err, p.out.String())
			}
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			t.Errorf("%s did not stop within 30 s of SIGINT", p.name)
		}
		if t.Failed() {
			t.Logf("--- %s output (tail) ---\n%s", p.name, tail(p.out.String(), 40))
		}
	})
	return p
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func writeSecret(t *testing.T, dir, name, value string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, []byte(value+"\n"), 0o600))
	return path
}

// TestServe_RolesInSeparateProcesses runs production mode against
// PostgreSQL and `payd devchain`, with the API, the gateway and the workers
// in three processes, and follows a payment from invoice to merchant.
func TestServe_RolesInSeparateProcesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	secrets := t.TempDir()

	m, err := hdwallet.GenerateMnemonic(24)
	require.NoError(t, err)
	funder, err := crypto.GenerateKey()
	require.NoError(t, err)
	secretEnv := []string{
		"PAY_MNEMONIC_FILE=" + writeSecret(t, secrets, "mnemonic", m.Phrase()),
		"PAY_SECRET_KEY_FILE=" + writeSecret(t, secrets, "secret-key", hex.EncodeToString(crypto.Keccak256([]byte(t.Name())))),
		"GAS_FUNDER_PRIVATE_KEY_FILE=" + writeSecret(t, secrets, "funder", hex.EncodeToString(crypto.FromECDSA(funder))),
		"PAY_ADMIN_TOKEN_FILE=" + writeSecret(t, secrets, "admin-token", "operator-token-for-tests"),
	}

	chainAddr := freeAddr(t)
	// Only the gas funder is funded: the sweep wallet starts empty and is
	// topped up by it.
	startProcess(t, "devchain", nil, "devchain", "--chain-rpc", chainAddr,
		"--fund", crypto.PubkeyToAddress(funder.PublicKey).Hex())
	// The test's webhook receiver is on loopback, which production refuses.
	env := append([]string{"DATABASE_URL=" + dbURL, "RPC_URL=http://" + chainAddr, "CHAIN_ID=1337",
		"WEBHOOK_ALLOW_PRIVATE_NETWORKS=true"}, secretEnv...)

	waitRPC(t, "http://"+chainAddr)
	apiAddr, gwAddr, workAddr, proxyAddr, metricsAddr := freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t)
	// Each process on one machine needs its own metrics address, or none.
	startProcess(t, "api", env, "serve", "--roles", "api", "--http", apiAddr, "--metrics", metricsAddr)
	startProcess(t, "gateway", env, "serve", "--roles", "gateway", "--http", gwAddr, "--rpc-proxy", proxyAddr, "--metrics", "")
	startProcess(t, "workers", env, "serve", "--roles", "settlement,sweep,webhooks", "--http", workAddr, "--metrics", "")
	for _, a := range []string{apiAddr, gwAddr, workAddr} {
		waitHTTP(t, "http://"+a+"/readyz", 90*time.Second)
	}

	recv := newReceiver(t)
	// Payouts to a wallet the service holds are refused by the CLI and the
	// API alike.
	w, err := hdwallet.NewWallet(m, "")
	require.NoError(t, err)
	sweepKey, err := w.SweepKey()
	require.NoError(t, err)
	sweepWallet := crypto.PubkeyToAddress(sweepKey.PublicKey)
	for _, held := range []string{crypto.PubkeyToAddress(funder.PublicKey).Hex(), strings.ToLower(sweepWallet.Hex())} {
		refused := exec.Command(paydBinary(t), "merchants", "create", "--settlement-address", held)
		refused.Env = append(os.Environ(), env...)
		out, err := refused.CombinedOutput()
		require.Error(t, err, "%s", out)
		require.Contains(t, string(out), "settlement_address_reserved")
		require.NotContains(t, string(out), "not checked for contract code")
	}
	// The CLI reads the node URL from RPC_URL_FILE as serve does.
	fromFile := exec.Command(paydBinary(t), "merchants", "create", "--settlement-address", sweepWallet.Hex())
	for _, kv := range env {
		if !strings.HasPrefix(kv, "RPC_URL=") {
			fromFile.Env = append(fromFile.Env, kv)
		}
	}
	fromFile.Env = append(append(fromFile.Env, os.Environ()...), "RPC_URL_FILE="+writeSecret(t, secrets, "rpc-url", "http://"+chainAddr))
	out, err := fromFile.CombinedOutput()
	require.Error(t, err, "%s", out)
	require.Contains(t, string(out), "settlement_address_reserved")
	require.NotContains(t, string(out), "not checked for contract code", "RPC_URL_FILE is the node URL")
	settle, err := crypto.GenerateKey()
	require.NoError(t, err)
	create := exec.Command(paydBinary(t), "merchants", "create", "--webhook-url", recv.srv.URL+"/hooks",
		"--settlement-address", crypto.PubkeyToAddress(settle.PublicKey).Hex(), "--name", "shop")
	create.Env = append(os.Environ(), env...)
	out, err = create.CombinedOutput()
	require.NoError(t, err, "%s", out)
	key := regexp.MustCompile(`api_key=(\S+)`).FindSubmatch(out)
	secret := regexp.MustCompile(`webhook_secret=(\S+)`).FindSubmatch(out)
	require.NotNil(t, key, "%s", out)
	require.NotNil(t, secret, "%s", out)
	recv.setSecret(string(secret[1]))

	api := apiClient{t: t, base: "http://" + apiAddr, key: string(key[1])}
	code, body := api.do("PATCH", "/v1/merchant", map[string]string{"settlement_address": sweepWallet.Hex()}, nil)
	require.Equal(t, http.StatusUnprocessableEntity, code, "%v", body)
	require.Equal(t, "settlement_address_reserved", body["code"])
	code, body = api.do("GET", "/v1/merchant", nil, nil)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, crypto.PubkeyToAddress(settle.PublicKey).Hex(), body["settlement_address"], "EIP-55")

	payFlow(t, ctx, api, chainAddr, recv)

	// The API process, which holds no sweep key, serves the operator's
	// sweep retry and status.
	op := apiClient{t: t, base: "http://" + apiAddr, key: "operator-token-for-tests"}
	code, retried := op.do("POST", "/v1/admin/sweeps/retry", nil, nil)
	require.Equal(t, http.StatusOK, code, "%v", retried)
	require.Empty(t, retried["requeued"])
	code, status := op.do("GET", "/v1/admin/status", nil, nil)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, true, status["healthy"], "%v", status)

	// Metrics are on the operator listener only. The settled invoice is
	// no longer live: the gauge counts none of it (SETTLED is history,
	// counted by the sweep as it happens, in the workers' process).
	metrics := httpGet(t, "http://"+metricsAddr+"/metrics", "")
	require.Contains(t, metrics, `evmpay_invoices{status="PENDING"} 0`)
	require.Contains(t, metrics, `evmpay_invoices{status="CONFIRMED"} 0`)
	require.NotContains(t, metrics, `evmpay_invoices{status="SETTLED"}`)
	require.Contains(t, httpGet(t, "http://"+apiAddr+"/metrics", ""), `"code":"not_found"`)
}

// waitRPC waits until a JSON-RPC node answers eth_chainId.
func waitRPC(t *testing.T, url string) {
	t.Helper()
	require.Eventually(t, func() bool {
		resp, err := httpPostJSON(url, `{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}`)
		return err == nil && strings.Contains(resp, "0x539")
	}, 60*time.Second, 200*time.Millisecond, "dev chain at %s never answered", url)
}

func httpPostJSON(url, body string) (string, error) {
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var sb strings.Builder
	_, err = bufio.NewReader(resp.Body).WriteTo(&sb)
	return sb.String(), err
}
