//go:build evmd

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
)

// startEvmdPeer adds a full node to the chain startEvmd started
// (scripts/evmd-node.sh start-peer): it syncs from the validator over
// CometBFT's p2p and serves its own JSON-RPC. It returns the peer's RPC
// URL and its pid.
func startEvmdPeer(t *testing.T) (string, int) {
	t.Helper()
	cmd := exec.Command(evmdScript(t), "start-peer")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "evmd-node.sh start-peer: %s", stderr.String())
	kv := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			kv[k] = v
		}
	}
	b, err := os.ReadFile(kv["PEER_PIDFILE"])
	require.NoError(t, err, "%s", out)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	return kv["PEER_RPC_URL"], pid
}

// TestEvmd_TwoNodes_OneKilledMidRun: payd serve's three processes read a
// real evmd chain through two of its nodes (RPC_URL lists both: the pool of
// rpcproxy/nodes), the full node first, so reads go to it; the full node
// is killed in the middle of six payments. Every invoice settles, every
// indexed block builds on the one before (no block lost), each invoice has
// exactly one sweep and the merchant holds exactly what was paid (nothing
// sent twice), and the status lists the dead node as not usable.
func TestEvmd_TwoNodes_OneKilledMidRun_NoBlockLostNothingSentTwice(t *testing.T) {
	r := newEvmdRig(t)
	peerURL, peerPID := startEvmdPeer(t)
	t.Logf("evmd full node at %s (pid %d) beside the validator at %s", peerURL, peerPID, r.node.rpcURL)
	dbURL := pgtest.URL(t)
	r.startServe(dbURL, "RPC_URL="+peerURL+","+r.node.rpcURL, "FINALITY=instant", "NATIVE_SYMBOL=TEST", "PRICING_SYMBOLS=TEST=ETH")

	status := func() []map[string]any {
		var s struct {
			Nodes []map[string]any `json:"nodes"`
		}
		body := httpGet(t, r.api.base+"/v1/admin/status", "operator-token-for-tests")
		require.NoError(t, json.Unmarshal([]byte(body), &s), "%s", body)
		require.Len(t, s.Nodes, 2, "%s", body)
		return s.Nodes
	}
	nodes := status()
	require.Equal(t, true, nodes[0]["current"], "reads go to the node listed first: %v", nodes)
	require.Equal(t, true, nodes[1]["up"], "%v", nodes)

	const n = 6
	var (
		ids      []int64
		killedAt uint64
	)
	total := new(big.Int)
	paid := time.Now()
	for i := range n {
		amount := new(big.Int).Mul(big.NewInt(1e15), big.NewInt(int64(i+1)))
		inv := r.create(map[string]any{"amount_wei": amount.String()})
		ids = append(ids, int64(inv["id"].(float64)))
		total.Add(total, amount)
		// Paid through the validator (the test's client), which stays.
		r.sendNative(common.HexToAddress(inv["deposit_address"].(string)), amount)
		if i == n/2 {
			require.NoError(t, syscall.Kill(peerPID, syscall.SIGKILL))
			head, err := r.eth.BlockNumber(r.ctx)
			require.NoError(t, err)
			killedAt = head
			t.Logf("killed the full node the reads went to, at block %d", head)
		}
	}
	for _, id := range ids {
		got, _ := r.untilStatus(id, "SETTLED", 180*time.Second)
		require.Equal(t, "SWEPT", got["sweep_status"])
	}
	figure(t, "six payments, a node killed after the fourth: all SETTLED", time.Since(paid))
	require.Equal(t, total.String(), r.nativeBalance(r.settle).String(), "the merchant got exactly what was paid: nothing sent twice")

	waitUntil(t, 30*time.Second, 500*time.Millisecond, func() bool {
		nodes = status()
		return nodes[0]["up"] == false && nodes[1]["current"] == true
	}, func() string {
		return fmt.Sprintf("the dead node still usable, or reads not on the validator: %v", nodes)
	})

	ctx := context.Background()
	db, err := postgres.Open(ctx, dbURL, postgres.Config{MaxOpenConns: 2})
	require.NoError(t, err)
	defer db.Close()
	st := onRecordedChain(t, db)
	for _, id := range ids {
		txs, err := st.ListSweepTxsByInvoice(ctx, id)
		require.NoError(t, err)
		sweeps := 0
		for _, tx := range txs {
			if tx.Kind == store.SweepTxSweep && tx.Status == store.SweepTxMined {
				sweeps++
			}
		}
		require.Equal(t, 1, sweeps, "invoice %d: one sweep mined", id)
	}
	// Every indexed block builds on the one before it, from the cursor back
	// to the first indexed block: none was lost when reads moved.
	cur, err := st.GetCursor(ctx, store.CursorIndexer)
	require.NoError(t, err)
	first, err := st.GetBlock(ctx, cur.BlockNumber)
	require.NoError(t, err)
	for b := first; ; {
		parent, err := st.GetBlock(ctx, b.Number-1)
		if err != nil {
			require.ErrorIs(t, err, store.ErrNotFound)
			t.Logf("blocks %d–%d indexed, each on its parent", b.Number, cur.BlockNumber)
			require.True(t, b.Number < killedAt && killedAt < cur.BlockNumber,
				"the indexed run (%d–%d) spans the kill at block %d", b.Number, cur.BlockNumber, killedAt)
			break
		}
		require.Equal(t, parent.Hash, b.ParentHash, "block %d builds on the indexed %d", b.Number, parent.Number)
		b = parent
	}
}
