package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hdwallet"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
)

// Credentials of a hosted node, in each place providers put them.
const (
	nodeUser     = "evmpay-user"
	nodePassword = "pw-Sup3rSecret"
	nodePathKey  = "9aa3d95b3bc440fa88ea12eaa4456161"
	nodeQueryKey = "QK-7f3a9c2e1b"
)

var nodeSecrets = []string{nodePassword, nodePathKey, nodeQueryKey}

func requireNoNodeSecret(t *testing.T, what, text string) {
	t.Helper()
	for _, s := range nodeSecrets {
		require.NotContains(t, text, s, "%s leaks a node credential:\n%s", what, text)
	}
}

// hostedNodeURL is a node URL for addr with a password, a key in the path
// and a key in the query.
func hostedNodeURL(addr string) string {
	return "http://" + nodeUser + ":" + nodePassword + "@" + addr + "/v3/" + nodePathKey + "?apikey=" + nodeQueryKey
}

func TestRedactURL_HidesCredentialsKeepsNode(t *testing.T) {
	t.Parallel()
	require.Equal(t, "postgres://evmpay:xxxxx@db:5432/pay", redactURL("postgres://evmpay:hunter2@db:5432/pay"))
	require.Equal(t, "http://127.0.0.1:8545", redactURL("http://127.0.0.1:8545"))
	require.Equal(t, "http://evmpay-user:xxxxx@node.example:8545/v3/xxxxx?apikey=xxxxx",
		redactURL(hostedNodeURL("node.example:8545")))
	require.Equal(t, "https://xxxxx@eth.example/rpc", redactURL("https://tokenonly@eth.example/rpc"))
	require.Equal(t, "https://eth-mainnet.example/v2/xxxxx", redactURL("https://eth-mainnet.example/v2/aBcD1234eFgH5678iJkL"))
}

func TestRedactor_ErrorQuotingNodeURL_Redacted(t *testing.T) {
	t.Parallel()
	node := hostedNodeURL("127.0.0.1:1")
	red := newRedactor(node)
	// What Go's HTTP client returns: the password masked, the keys not.
	u, err := url.Parse(node)
	require.NoError(t, err)
	inner := &url.Error{Op: "Post", URL: u.Redacted(), Err: errors.New("dial tcp 127.0.0.1:1: connect: connection refused")}

	var buf bytes.Buffer
	log := slog.New(red.Handler(slog.NewJSONHandler(&buf, nil))).With("node", node)
	log.Warn("indexer: head failed "+node, "error", inner, "url", u, slog.Group("g", "raw", nodeQueryKey))
	requireNoNodeSecret(t, "the log", buf.String())
	require.Contains(t, buf.String(), "connection refused")

	wrapped := red.Error(usageError("chain node " + node + ": " + inner.Error()))
	requireNoNodeSecret(t, "the error", wrapped.Error())
	var ue usageError
	require.ErrorAs(t, wrapped, &ue, "a redacted error keeps its type")
}

// hostedNode is a node gateway like a provider's: it answers only with the
// credentials of hostedNodeURL and forwards to the dev chain at chainURL.
func hostedNode(t *testing.T, chainURL string) *httptest.Server {
	t.Helper()
	target, err := url.Parse(chainURL)
	require.NoError(t, err)
	fwd := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pw, ok := r.BasicAuth()
		if !ok || user != nodeUser || pw != nodePassword || r.URL.Path != "/v3/"+nodePathKey || r.URL.Query().Get("apikey") != nodeQueryKey {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		r.URL.Path, r.URL.RawQuery = "/", ""
		r.Header.Del("Authorization")
		fwd.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// serveSecretEnv writes the secrets `payd serve` reads from files.
func serveSecretEnv(t *testing.T) []string {
	t.Helper()
	dir := t.TempDir()
	m, err := hdwallet.GenerateMnemonic(24)
	require.NoError(t, err)
	funder, err := crypto.GenerateKey()
	require.NoError(t, err)
	return []string{
		"PAY_MNEMONIC_FILE=" + writeSecret(t, dir, "mnemonic", m.Phrase()),
		"PAY_SECRET_KEY_FILE=" + writeSecret(t, dir, "secret-key", hex.EncodeToString(crypto.Keccak256([]byte(t.Name())))),
		"GAS_FUNDER_PRIVATE_KEY_FILE=" + writeSecret(t, dir, "funder", hex.EncodeToString(crypto.FromECDSA(funder))),
		"PAY_ADMIN_TOKEN_FILE=" + writeSecret(t, dir, "admin-token", "operator-token-for-tests"),
	}
}

// runServeToExit runs `payd serve` as a process that is expected to refuse
// to start, and returns its output.
func runServeToExit(t *testing.T, env []string) string {
	t.Helper()
	cmd := exec.Command(paydBinary(t), "serve", "--roles", "gateway,sweep", "--http", freeAddr(t), "--rpc-proxy", freeAddr(t), "--metrics", "")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "payd serve started:\n%s", out)
	return string(out)
}

// `payd serve` with a hosted node's URL (password, key in the path, key in
// the query) never prints the credentials: not when the node does not
// answer, not when it is on the wrong chain, not in the startup line, and
// not in the errors of the indexer and the sweeper while the node is down.
func TestServe_NodeURLWithCredentials_NeverLogged(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	chainAddr := freeAddr(t)
	chainDone := make(chan error, 1)
	go func() { chainDone <- run(ctx, []string{"devchain", "--chain-rpc", chainAddr}, &syncBuffer{}) }()
	t.Cleanup(func() { cancel(); <-chainDone })
	waitChainID(t, "http://"+chainAddr)
	node := hostedNode(t, "http://"+chainAddr)
	nodeAddr := strings.TrimPrefix(node.URL, "http://")

	env := append([]string{"DATABASE_URL=" + pgtest.URL(t)}, serveSecretEnv(t)...)

	t.Run("node down", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		down := l.Addr().String()
		l.Close()
		out := runServeToExit(t, append(env, "RPC_URL="+hostedNodeURL(down)))
		require.Contains(t, out, "does not answer eth_chainId")
		require.Contains(t, out, down, "the error still names the node")
		requireNoNodeSecret(t, "payd serve", out)
	})

	t.Run("wrong CHAIN_ID, from RPC_URL_FILE", func(t *testing.T) {
		file := writeSecret(t, t.TempDir(), "rpc-url", hostedNodeURL(nodeAddr))
		out := runServeToExit(t, append(env, "RPC_URL_FILE="+file, "CHAIN_ID=1"))
		require.Contains(t, out, "reports chain 1337")
		requireNoNodeSecret(t, "payd serve", out)
	})

	t.Run("node up, then down", func(t *testing.T) {
		httpAddr := freeAddr(t)
		p := startProcess(t, "serve", append(env, "RPC_URL="+hostedNodeURL(nodeAddr), "CHAIN_ID=1337"),
			"serve", "--roles", "gateway,sweep", "--http", httpAddr, "--rpc-proxy", freeAddr(t), "--metrics", "")
		waitHTTP(t, "http://"+httpAddr+"/readyz", 90*time.Second)
		require.Contains(t, p.out.String(), "payd serving")
		require.Contains(t, p.out.String(), nodeAddr+"/v3/xxxxx?apikey=xxxxx", "the startup line names the node, redacted")

		// The node goes away: its port refuses, and the connections it had
		// are closed — in that order, or a client that reconnects in between
		// keeps a live connection to the "dead" node (make test saw the
		// indexer never fail: it was still being served).
		node.Listener.Close()
		node.CloseClientConnections()
		waitUntil(t, 60*time.Second, 200*time.Millisecond, func() bool {
			out := p.out.String()
			return strings.Contains(out, "component=indexer") && strings.Contains(out, "connection refused")
		}, func() string { return "the indexer never logged the outage:\n" + p.out.String() })
		requireNoNodeSecret(t, "payd serve", p.out.String())
	})
}

// The startup line names every node of RPC_URL, each redacted (a list was
// once logged as "(unparsable URL)").
func TestRedactedNodes_EachNodeRedacted(t *testing.T) {
	t.Parallel()
	got := redactedNodes("https://a.example/v3/0123456789abcdef0123456789abcdef, http://u:pw@b.example:8545?apikey=s3cret")
	require.Equal(t, "https://a.example/v3/xxxxx,http://u:xxxxx@b.example:8545?apikey=xxxxx", got)
}
