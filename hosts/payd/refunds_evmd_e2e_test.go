//go:build evmd

package main

import "testing"

// TestEvmd_RefundsAndPayoutsEndToEnd runs the refunds and payouts end to
// end (refundsFlow: every case of issue #26's "done when", kill -9 of the
// workers mid-flight, the ledger reconciled with the chain to the wei)
// against a fresh real evmd chain instead of the dev chain. It runs with
// the other TestEvmd tests, one after another (one evmd node at a time):
//
//	scripts/evmd-e2e.sh /path/to/evmd
func TestEvmd_RefundsAndPayoutsEndToEnd(t *testing.T) {
	node := startEvmd(t)
	t.Cleanup(func() { stopEvmd(t) })
	refundsFlow(t, newRefundRig(t, refundChain{rpc: node.rpcURL, chainID: node.chainID, funded: node.funded}))
}
