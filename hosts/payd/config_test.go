package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func envOf(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func TestServe_SecretInEnvironment_RefusedWithReason(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"PAY_MNEMONIC", "PAY_SECRET_KEY", "GAS_FUNDER_PRIVATE_KEY", "PAY_ADMIN_TOKEN"} {
		_, err := readServeEnv(envOf(map[string]string{
			"DATABASE_URL": "postgres://x", "RPC_URL": "http://x", name: "super-secret-value",
		}))
		require.Error(t, err, name)
		require.Contains(t, err.Error(), name+" is set in the environment")
		require.Contains(t, err.Error(), "development mode")
		require.Contains(t, err.Error(), name+"_FILE", "the error says what to do instead")
		require.NotContains(t, err.Error(), "super-secret-value", "the secret never reaches an error")
	}
}

func TestServe_MissingEnvironment_NamesEachVariable(t *testing.T) {
	t.Parallel()
	_, err := readServeEnv(envOf(nil))
	require.ErrorContains(t, err, "DATABASE_URL is required")
	require.ErrorContains(t, err, "RPC_URL is required")

	_, err = readServeEnv(envOf(map[string]string{"DATABASE_URL": "x", "RPC_URL": "y", "CHAIN_ID": "abc", "SWEEP_FEE_POLICY": "free"}))
	require.ErrorContains(t, err, `CHAIN_ID="abc"`)
	require.ErrorContains(t, err, "want sponsor or deduct")

	e, err := readServeEnv(envOf(map[string]string{"DATABASE_URL": "x", "RPC_URL": "y", "CHAIN_ID": "9000", "INDEXER_BACKFILL": "true"}))
	require.NoError(t, err)
	require.EqualValues(t, 9000, e.chainID)
	require.True(t, e.backfill)
	require.Equal(t, 12, e.confirmations)
	require.True(t, e.minGasPrice.IsZero(), "no minimum gas price unless set")
}

// MIN_GAS_PRICE is the node's minimum gas price in wei (a Cosmos EVM
// validator's --minimum-gas-prices): an exact integer.
func TestServe_MinGasPrice_ExactWei(t *testing.T) {
	t.Parallel()
	e, err := readServeEnv(envOf(map[string]string{"DATABASE_URL": "x", "RPC_URL": "y", "MIN_GAS_PRICE": "1000000000"}))
	require.NoError(t, err)
	require.Equal(t, "1000000000", e.minGasPrice.String())
	for _, bad := range []string{"1.5", "-1", "1e9", "one"} {
		_, err := readServeEnv(envOf(map[string]string{"DATABASE_URL": "x", "RPC_URL": "y", "MIN_GAS_PRICE": bad}))
		require.ErrorContains(t, err, "MIN_GAS_PRICE", bad)
	}
}

func TestFileProvider_ReadsFileAndTrims(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "key")
	require.NoError(t, os.WriteFile(path, []byte("  abc\n"), 0o600))
	v, err := fileProvider{getenv: envOf(map[string]string{"PAY_SECRET_KEY_FILE": path})}.Secret(context.Background(), "PAY_SECRET_KEY")
	require.NoError(t, err)
	require.Equal(t, "abc", string(v))

	_, err = fileProvider{getenv: envOf(nil)}.Secret(context.Background(), "PAY_SECRET_KEY")
	require.ErrorIs(t, err, errSecretMissing)
	require.ErrorContains(t, err, "PAY_SECRET_KEY_FILE")
}

func TestDevProvider_GeneratesOnceAndPrefersEnvironment(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	p1, err := newDevProvider(envOf(nil), dir)
	require.NoError(t, err)
	m1, err := p1.Secret(ctx, "PAY_MNEMONIC")
	require.NoError(t, err)
	require.Len(t, strings.Fields(string(m1)), 24)
	info, err := os.Stat(filepath.Join(dir, "dev-secrets.json"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "generated secrets are private to the user")

	p2, err := newDevProvider(envOf(nil), dir)
	require.NoError(t, err)
	m2, err := p2.Secret(ctx, "PAY_MNEMONIC")
	require.NoError(t, err)
	require.Equal(t, m1, m2, "a restart keeps the same wallet")

	p3, err := newDevProvider(envOf(map[string]string{"PAY_ADMIN_TOKEN": "from-the-environment"}), dir)
	require.NoError(t, err)
	tok, err := loadAdminToken(ctx, p3)
	require.NoError(t, err)
	require.Equal(t, "from-the-environment", tok)
	_, err = loadWallet(ctx, p3)
	require.NoError(t, err)
	_, err = loadGasFunder(ctx, p3)
	require.NoError(t, err)
	k, err := loadSecretKey(ctx, p3)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(k), 32)
}

func TestParseRoles(t *testing.T) {
	t.Parallel()
	rs, err := parseRoles("api, gateway")
	require.NoError(t, err)
	require.Equal(t, "api,gateway", rs.String())
	rs, err = parseRoles("all")
	require.NoError(t, err)
	require.Len(t, rs, 5)
	_, err = parseRoles("api,mining")
	require.ErrorContains(t, err, `unknown role "mining"`)
	_, err = parseRoles("")
	require.Error(t, err)
}

func TestRun_UnknownCommand_UsageError(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	err := run(context.Background(), []string{"frobnicate"}, &out)
	var u usageError
	require.ErrorAs(t, err, &u)
	require.Contains(t, err.Error(), "payd help")
	require.NoError(t, run(context.Background(), []string{"help"}, &out))
	require.Contains(t, out.String(), "payd serve")
}

func TestPay_BadURI_ClearError(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	err := run(context.Background(), []string{"pay", "ethereum:0xnothex@1337?value=1"}, &out)
	require.ErrorContains(t, err, "payd pay")
	require.ErrorContains(t, err, "address")
	err = run(context.Background(), []string{"pay"}, &out)
	require.ErrorContains(t, err, "usage: payd pay")
}

func TestNodeURL_FromVariableOrFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "rpc")
	require.NoError(t, os.WriteFile(file, []byte(" https://node.example/key123\n"), 0o600))
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, []byte("\n"), 0o600))
	got, err := nodeURL(envOf(map[string]string{"RPC_URL": "http://127.0.0.1:8545"}))
	require.NoError(t, err)
	require.Equal(t, "http://127.0.0.1:8545", got)
	got, err = nodeURL(envOf(map[string]string{"RPC_URL_FILE": file}))
	require.NoError(t, err)
	require.Equal(t, "https://node.example/key123", got)
	got, err = nodeURL(envOf(nil))
	require.NoError(t, err)
	require.Empty(t, got)
	_, err = nodeURL(envOf(map[string]string{"RPC_URL": "http://a", "RPC_URL_FILE": file}))
	require.ErrorContains(t, err, "both set")
	_, err = nodeURL(envOf(map[string]string{"RPC_URL_FILE": empty}))
	require.ErrorContains(t, err, "is empty")
	_, err = nodeURL(envOf(map[string]string{"RPC_URL_FILE": filepath.Join(dir, "missing")}))
	require.ErrorContains(t, err, "RPC_URL_FILE")
}
