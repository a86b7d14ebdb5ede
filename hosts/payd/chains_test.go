package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/sqlite/sqlitetest"
)

// chainsFile writes a CHAINS_FILE holding body and returns the
// environment of a first chain 1337 that names it.
func chainsFile(t *testing.T, body string) func(string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "chains.json")
	require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
	return envOf(map[string]string{"DATABASE_URL": "x", "RPC_URL": "http://first", "CHAIN_ID": "1337", "CHAINS_FILE": path})
}

func TestServeEnv_ChainsFile_EachChainsSettings(t *testing.T) {
	t.Parallel()
	e, err := readServeEnv(chainsFile(t, `{"chains": [
		{"chain_id": 9000, "rpc_url": "http://a:8545,http://b:8545", "name": "evmd", "native_symbol": "TEST", "finality": "instant",
		 "min_gas_price": "1000000000", "public_rpc_url": "https://rpc.example", "explorer_tx_url": "https://x.example/tx/{tx}",
		 "explorer_address_url": "https://x.example/a/{address}",
		 "tokens": [{"symbol": "USDC", "address": "0x5FbDB2315678afecb367f032d93F642f64180aa3", "decimals": 6}]},
		{"chain_id": "1338", "rpc_url": "http://c:8545", "confirmations": 3}]}`))
	require.NoError(t, err)
	require.EqualValues(t, 1337, e.chainID, "the environment's chain stays the first")
	require.Len(t, e.chains, 2)
	evmd := e.chains[0]
	require.EqualValues(t, 9000, evmd.chainID)
	require.Equal(t, []string{"http://a:8545", "http://b:8545"}, nodeURLs(evmd.rpcURL))
	require.Equal(t, store.FinalityInstant, evmd.finality)
	require.Zero(t, evmd.confirmations, "instant finality counts none")
	require.Equal(t, "TEST", evmd.nativeSymbol)
	require.Equal(t, "evmd", evmd.chainName)
	require.Equal(t, "1000000000", evmd.minGasPrice.String())
	require.Equal(t, "https://x.example/tx/{tx}", evmd.explorerTxURL)
	require.Len(t, evmd.tokens, 1)
	require.Equal(t, common.HexToAddress("0x5FbDB2315678afecb367f032d93F642f64180aa3"), evmd.tokens[0].Address)
	require.EqualValues(t, 1338, e.chains[1].chainID)
	require.Equal(t, 3, e.chains[1].confirmations)
	require.Empty(t, e.chains[1].tokens)
}

func TestServeEnv_ChainsFile_Refused(t *testing.T) {
	t.Parallel()
	for want, body := range map[string]string{
		`unknown member "rpc"`:                         `{"chains": [{"chain_id": 9000, "rpc": "http://a"}]}`,
		"chain_id is required":                         `{"chains": [{"rpc_url": "http://a"}]}`,
		"RPC_URL is required":                          `{"chains": [{"chain_id": 9000}]}`,
		"chain 1337 is configured twice":               `{"chains": [{"chain_id": 1337, "rpc_url": "http://a"}]}`,
		"chain 9000 is configured twice":               `{"chains": [{"chain_id": 9000, "rpc_url": "http://a"}, {"chain_id": 9000, "rpc_url": "http://b"}]}`,
		"instant finality takes no CONFIRMATIONS":      `{"chains": [{"chain_id": 9000, "rpc_url": "http://a", "finality": "instant", "confirmations": 2}]}`,
		`CHAIN_EXPLORER_TX_URL="https://x.example/tx"`: `{"chains": [{"chain_id": 9000, "rpc_url": "http://a", "explorer_tx_url": "https://x.example/tx"}]}`,
		`NATIVE_SYMBOL="T"`:                            `{"chains": [{"chain_id": 9000, "rpc_url": "http://a", "native_symbol": "T"}]}`,
		"tokens:":                                      `{"chains": [{"chain_id": 9000, "rpc_url": "http://a", "tokens": [{"symbol": "USDC", "address": "0x12"}]}]}`,
		`want {"chains"`:                               `{"chain": []}`,
		"chains[0]: CHAIN_ID=\"x\"":                    `{"chains": [{"chain_id": "x", "rpc_url": "http://a"}]}`,
		"name must be a string or a number":            `{"chains": [{"chain_id": 9000, "rpc_url": "http://a", "name": ["a"]}]}`,
	} {
		_, err := readServeEnv(chainsFile(t, body))
		require.ErrorContains(t, err, want, body)
	}
	// More chains need the first one's id.
	path := filepath.Join(t.TempDir(), "chains.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"chains": [{"chain_id": 9000, "rpc_url": "http://a"}]}`), 0o600))
	_, err := readServeEnv(envOf(map[string]string{"DATABASE_URL": "x", "RPC_URL": "http://first", "CHAINS_FILE": path}))
	require.ErrorContains(t, err, "set CHAIN_ID for the first one")
}

func TestParseChainList(t *testing.T) {
	t.Parallel()
	got, err := parseChainList(" 1337, 9000 ")
	require.NoError(t, err)
	require.Equal(t, map[uint64]bool{1337: true, 9000: true}, got)
	none, err := parseChainList("")
	require.NoError(t, err)
	require.Nil(t, none)
	for _, bad := range []string{"0", "abc", "1337,", "-1"} {
		_, err := parseChainList(bad)
		require.Error(t, err, bad)
		require.True(t, strings.HasPrefix(err.Error(), "--chains:"), err.Error())
	}
}

// --chains places the chain-bound roles: a process given the second chain
// runs its indexer, settlement and sweep and nothing of the first; a chain
// --chains names that is not configured stops the start.
func TestServe_ChainsFlag_PlacesTheChainBoundRoles(t *testing.T) {
	t.Parallel()
	r := newTwoChains(t, roleSet{roleGateway: true, roleSettlement: true, roleSweep: true}, func(c *appConfig) {
		c.onlyChains = map[uint64]bool{secondDevChain: true}
	})
	require.Equal(t, []string{"evmpay@1338"}, workerNames(r.app, "evmpay"))
	require.Nil(t, r.app.svc, "nothing of the first chain")
	require.NotNil(t, r.app.others[0].svc.Indexer)
	require.NotNil(t, r.app.others[0].svc.Settlement)
	require.NotNil(t, r.app.others[0].svc.Sweeper)

	_, err := newApp(t.Context(), r.st, appConfig{roles: roleSet{roleSettlement: true}, httpAddr: "127.0.0.1:0",
		chain: chainSpec{rpcURL: r.chains[devChainID].url, chainID: devChainID}, onlyChains: map[uint64]bool{9000: true}})
	require.ErrorContains(t, err, "--chains: chain 9000 is not configured")
}

// A process that starts a chain's parts clears the chain's stop record
// before they run: the API processes that read it take the chain's
// invoices again.
func TestRunChainParts_ClearsTheStopRecordFirst(t *testing.T) {
	st := sqlitetest.New(t) // bound to chain 1337
	require.NoError(t, st.SetChainStop(t.Context(), problemAnotherChain, time.Now()))
	a := &app{log: slog.New(slog.DiscardHandler)}
	ran := errors.New("ran")
	err := a.runChainParts(st, 1337, func(ctx context.Context) error {
		_, _, ok, err := st.ChainStop(ctx)
		require.NoError(t, err)
		require.False(t, ok, "cleared before the parts run")
		return ran
	})(t.Context())
	require.ErrorIs(t, err, ran)
}
