//go:build evmd

package main

import (
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store/postgres/pgtest"
)

// TestEvmd_InstantFinality: evmd finalises a block when it includes it
// (CometBFT), so with FINALITY=instant an invoice is CONFIRMED within a
// few blocks of its payment — not after 12 (issue #36 item 5) — and then
// swept and settled as always. The chain's own coin is called by its name
// (NATIVE_SYMBOL: evmd's genesis here names it TEST), not "ETH".
func TestEvmd_InstantFinality_ConfirmedWithinAFewBlocks(t *testing.T) {
	confirmedWithinAFewBlocks(t, "instant")
}

// TestEvmd_TagFinality: evmd answers the "finalized" tag with its latest
// block, so under FINALITY=tag the indexer records each block as final
// (its hash checked against the indexed chain) and an invoice is
// CONFIRMED within a few blocks too.
func TestEvmd_TagFinality_ConfirmedWithinAFewBlocks(t *testing.T) {
	confirmedWithinAFewBlocks(t, "tag")
}

func confirmedWithinAFewBlocks(t *testing.T, finality string) {
	r := newEvmdRig(t)
	r.startServe(pgtest.URL(t), "FINALITY="+finality, "NATIVE_SYMBOL=TEST", "PRICING_SYMBOLS=TEST=ETH")
	inv := r.create(map[string]any{"amount_wei": "250000000000000000"})
	require.Equal(t, "TEST", inv["asset"].(map[string]any)["symbol"])
	paid := time.Now()
	h := r.payWithEthers(inv["payment_uri"].(string))
	receipt, err := r.eth.TransactionReceipt(r.ctx, common.HexToHash(h))
	require.NoError(t, err)
	id := int64(inv["id"].(float64))
	r.untilStatus(id, "CONFIRMED", 60*time.Second)
	head, err := r.eth.BlockNumber(r.ctx)
	require.NoError(t, err)
	figure(t, "native paid→confirmed ("+finality+" finality)", time.Since(paid))
	require.LessOrEqual(t, head-receipt.BlockNumber.Uint64(), uint64(4),
		"confirmed within a few blocks of the payment's block %d (head %d when seen)", receipt.BlockNumber, head)
	got, _ := r.untilStatus(id, "SETTLED", 120*time.Second)
	figure(t, "native paid→settled ("+finality+" finality)", time.Since(paid))
	require.Equal(t, "SWEPT", got["sweep_status"])
	r.requireWebhooks(id, "invoice.paid", "invoice.confirmed", "invoice.settled")
}
