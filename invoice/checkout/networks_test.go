package checkout_test

import (
	"encoding/json"
	"html"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/invoice/checkout"
)

var evmd = checkout.Network{ChainID: 9000, Name: "evmd", NativeSymbol: "TEST", RPCURL: "https://rpc.evmd.example/",
	ExplorerTxURL: "https://explorer.evmd.example/tx/{tx}", ExplorerAddressURL: "https://explorer.evmd.example/address/{address}"}

func TestConfig_Networks_EachBadNetworkRefusedSayingWhich(t *testing.T) {
	t.Parallel()
	with := func(f func(n *checkout.Network)) []checkout.Network {
		n := evmd
		f(&n)
		return []checkout.Network{{ChainID: 1, Name: "mainnet"}, n}
	}
	for _, tc := range []struct {
		name     string
		networks []checkout.Network
		want     string
	}{
		{"zero chain id", with(func(n *checkout.Network) { n.ChainID = 0 }), `checkout: Networks[1] ("evmd"): ChainID is required`},
		{"chain id twice", with(func(n *checkout.Network) { n.ChainID = 1 }), "checkout: Networks[1] (chain 1): ChainID listed twice"},
		{"symbol too short", with(func(n *checkout.Network) { n.NativeSymbol = "T" }), `checkout: Networks[1] (chain 9000): NativeSymbol "T" must be 2 to 6 ASCII letters or digits`},
		{"symbol too long", with(func(n *checkout.Network) { n.NativeSymbol = "TESTTEST" }), `NativeSymbol "TESTTEST" must be 2 to 6`},
		{"symbol not ASCII", with(func(n *checkout.Network) { n.NativeSymbol = "ЕТН" }), `NativeSymbol "ЕТН" must be 2 to 6 ASCII letters or digits`},
		{"symbol with a space", with(func(n *checkout.Network) { n.NativeSymbol = "T T" }), `NativeSymbol "T T" must be`},
		{"name with a newline", with(func(n *checkout.Network) { n.Name = "evmd\n" }), "checkout: Networks[1] (chain 9000): Name must be at most 64 bytes without control characters"},
		{"relative RPC URL", with(func(n *checkout.Network) { n.RPCURL = "/rpc" }), "checkout: Networks[1] (chain 9000): RPCURL must be an absolute http(s) URL"},
		{"websocket RPC URL", with(func(n *checkout.Network) { n.RPCURL = "wss://rpc.evmd.example" }), "checkout: Networks[1] (chain 9000): RPCURL must be an absolute http(s) URL"},
		{"tx template without {tx}", with(func(n *checkout.Network) { n.ExplorerTxURL = "https://explorer.evmd.example/tx/" }), "checkout: Networks[1] (chain 9000): ExplorerTxURL must be an absolute http(s) URL with {tx} once"},
		{"tx template as script", with(func(n *checkout.Network) { n.ExplorerTxURL = "javascript:alert('{tx}')" }), "checkout: Networks[1] (chain 9000): ExplorerTxURL must be"},
		{"address template with {tx}", with(func(n *checkout.Network) { n.ExplorerAddressURL = "https://explorer.evmd.example/address/{tx}" }), "checkout: Networks[1] (chain 9000): ExplorerAddressURL must be an absolute http(s) URL with {address} once"},
	} {
		_, err := checkout.New(checkout.Config{Networks: tc.networks})
		require.Error(t, err, tc.name)
		require.Contains(t, err.Error(), tc.want, tc.name)
	}
	_, err := checkout.New(checkout.Config{Networks: with(func(*checkout.Network) {})})
	require.NoError(t, err, "the good network")
	_, err = checkout.New(checkout.Config{Networks: []checkout.Network{{ChainID: 5}}})
	require.NoError(t, err, "only ChainID is required: no name (the page says its chain id), ETH, no RPC URL, no explorer")
}

// TestCheckout_Networks_HandedToTheScriptByChainID: the page config holds
// every network under its chain id, with its defaults filled in and the
// explorer's base URL a wallet takes (blockExplorerUrls); the top-level
// members still describe every other chain.
func TestCheckout_Networks_HandedToTheScriptByChainID(t *testing.T) {
	t.Parallel()
	srv := newServer(t, checkout.Config{ChainName: "dev", RPCURL: "http://127.0.0.1:8545",
		Networks: []checkout.Network{evmd, {ChainID: 5, ExplorerAddressURL: "https://scan.example/a/{address}?tab=1"}}})
	cfg := pageConfig(t, srv.URL)
	require.Equal(t, "dev", cfg["chain_name"])
	require.Equal(t, "ETH", cfg["native_symbol"])
	require.Equal(t, "http://127.0.0.1:8545", cfg["rpc_url"])
	require.Equal(t, map[string]any{
		"9000": map[string]any{"chain_name": "evmd", "native_symbol": "TEST", "rpc_url": "https://rpc.evmd.example/",
			"explorer_tx": "https://explorer.evmd.example/tx/{tx}", "explorer_address": "https://explorer.evmd.example/address/{address}",
			"explorer": "https://explorer.evmd.example"},
		"5": map[string]any{"native_symbol": "ETH", "explorer_address": "https://scan.example/a/{address}?tab=1",
			"explorer": "https://scan.example"},
	}, cfg["networks"])

	require.NotContains(t, pageConfig(t, newServer(t, checkout.Config{}).URL), "networks", "none listed: the page config is as before")
}

// pageConfig is the configuration the page hands its script.
func pageConfig(t *testing.T, base string) map[string]any {
	t.Helper()
	_, page := get(t, base+"/checkout", nil)
	m := regexp.MustCompile(`data-config="([^"]*)"`).FindSubmatch(page)
	require.NotNil(t, m)
	var cfg map[string]any
	require.NoError(t, json.Unmarshal([]byte(html.UnescapeString(string(m[1]))), &cfg))
	return cfg
}
