package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestServe_ChainExplorerURLs_CheckedAndHandedToTheCheckoutPage(t *testing.T) {
	t.Parallel()
	base := map[string]string{"DATABASE_URL": "x", "RPC_URL": "y"}
	e, err := readServeEnv(envOf(base))
	require.NoError(t, err)
	require.Empty(t, e.explorerTxURL, "none by default")

	ok := map[string]string{"DATABASE_URL": "x", "RPC_URL": "y",
		"CHAIN_EXPLORER_TX_URL": "https://explorer.example/tx/{tx}", "CHAIN_EXPLORER_ADDRESS_URL": "https://explorer.example/address/{address}"}
	e, err = readServeEnv(envOf(ok))
	require.NoError(t, err)
	require.Equal(t, "https://explorer.example/tx/{tx}", e.explorerTxURL)
	require.Equal(t, "https://explorer.example/address/{address}", e.explorerAddressURL)

	for name, v := range map[string]string{
		"CHAIN_EXPLORER_TX_URL":      "https://explorer.example/tx/",
		"CHAIN_EXPLORER_ADDRESS_URL": "javascript:alert('{address}')",
	} {
		bad := map[string]string{"DATABASE_URL": "x", "RPC_URL": "y", name: v}
		_, err := readServeEnv(envOf(bad))
		require.ErrorContains(t, err, name+"=")
	}
}

// NATIVE_SYMBOL names the chain's coin (an evmd chain's own, not "ETH");
// a symbol wallets would refuse is an error naming the variable.
func TestServe_NativeSymbol_CheckedAtStart(t *testing.T) {
	t.Parallel()
	e, err := readServeEnv(envOf(map[string]string{"DATABASE_URL": "x", "RPC_URL": "y", "NATIVE_SYMBOL": "TEST"}))
	require.NoError(t, err)
	require.Equal(t, "TEST", e.nativeSymbol)
	for _, bad := range []string{"T", "TOOLONGX", "ET H", "<b>"} {
		_, err := readServeEnv(envOf(map[string]string{"DATABASE_URL": "x", "RPC_URL": "y", "NATIVE_SYMBOL": bad}))
		require.ErrorContains(t, err, `NATIVE_SYMBOL="`+bad+`": want 2 to 6 ASCII letters or digits`)
	}
}
