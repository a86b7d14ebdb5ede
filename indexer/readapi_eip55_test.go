package indexer_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"
)

// raw is a read API response decoded without typed addresses, so that the
// test sees the strings clients see.
type raw map[string]any

func TestReadAPI_Addresses_EIP55(t *testing.T) {
	t.Parallel()
	ic := newIndexedChain(t)
	from := ic.c.from.Hex()
	require.NotEqual(t, strings.ToLower(from), from, "the sender's checksum has upper-case letters")

	var tx raw
	status, p := get(t, ic.base, "/v1/transactions/"+ic.txs[2].Hex(), &tx)
	require.Equal(t, http.StatusOK, status, p)
	require.Equal(t, from, tx["from"])
	require.Equal(t, ic.to.Hex(), tx["to"])

	var block raw
	status, p = get(t, ic.base, "/v1/blocks/latest", &block)
	require.Equal(t, http.StatusOK, status, p)
	miner := block["miner"].(string)
	require.Equal(t, common.HexToAddress(miner).Hex(), miner)
	for _, tr := range block["transactions"].([]any) {
		require.Equal(t, from, tr.(map[string]any)["from"])
	}

	// Any case in, but not a wrong checksum.
	var page raw
	status, p = get(t, ic.base, "/v1/addresses/"+strings.ToLower(from)+"/transactions", &page)
	require.Equal(t, http.StatusOK, status, p)
	for _, tr := range page["transactions"].([]any) {
		require.Equal(t, from, tr.(map[string]any)["from"])
	}
	flipped := flipCase(from)
	status, p = get(t, ic.base, "/v1/addresses/"+flipped+"/transactions", nil)
	require.Equal(t, http.StatusBadRequest, status)
	require.Equal(t, "invalid_address", p.Code)
}

// flipCase swaps the case of the last letter of a checksummed address.
func flipCase(a string) string {
	b := []byte(a)
	for i := len(b) - 1; i >= 2; i-- {
		switch {
		case 'a' <= b[i] && b[i] <= 'f':
			b[i] -= 'a' - 'A'
			return string(b)
		case 'A' <= b[i] && b[i] <= 'F':
			b[i] += 'a' - 'A'
			return string(b)
		}
	}
	panic("no letter in " + a)
}
