package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/stretchr/testify/require"
)

var (
	payoutWalletRe = regexp.MustCompile(`msg="sweep: wallet recorded" component=sweep role=payout address=(0x[0-9a-fA-F]{40})`)
	reconciledRe   = regexp.MustCompile(`block (\d+): (\d+) ledger entries, (\d+) wallet balances compared, 0 differ`)
)

// warnings are the WARN (and ERROR) lines of a text log.
func warnings(log string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
			out = append(out, l)
		}
	}
	return out
}

// `payd dev`'s first screen holds no warning: the ledger's follower,
// which starts once the confirmed head reaches a block the indexer holds
// (the indexer starts at the chain's head, block 2, not at genesis), says
// nothing until then — it used to warn "follow inflows: not found" twice.
// Then money arrives at the demo merchant's payout wallet from outside
// (the native coin and the test token), and `payd reconcile` reconciles
// payd dev's SQLite database (DATABASE_URL=sqlite:…) with the dev chain,
// while payd dev runs.
func TestDev_NoWarningAtStart_AndReconcileOnSQLite(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	httpAddr, proxyAddr, chainAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	var out syncBuffer
	dataDir := t.TempDir()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"dev", "--http", httpAddr, "--rpc-proxy", proxyAddr, "--chain-rpc", chainAddr, "--metrics", "",
			"--block-time", "300ms", "--data", dataDir}, &out)
	}()
	waitUntil(t, 180*time.Second, 200*time.Millisecond, func() bool {
		return strings.Contains(out.String(), `msg="sweep: ledger started"`)
	}, func() string { return "the ledger never started:\n" + out.String() })
	require.Empty(t, warnings(out.String()), "payd dev's first screen holds no warning:\n%s", out.String())

	payout := payoutWalletRe.FindStringSubmatch(out.String())
	require.NotNil(t, payout, "the payout wallet is recorded:\n%s", out.String())
	token := devTokenRe.FindStringSubmatch(out.String())
	require.NotNil(t, token, "the banner prints the test token")
	for _, uri := range []string{
		fmt.Sprintf("ethereum:%s@1337?value=100000000000000000", payout[1]),
		fmt.Sprintf("ethereum:%s@1337/transfer?address=%s&uint256=12500000", token[2], payout[1]),
	} {
		var payOut bytes.Buffer
		require.NoError(t, run(ctx, []string{"pay", "--rpc", chainAddr, uri}, &payOut), "%s", uri)
	}
	eth, err := ethclient.DialContext(ctx, "http://"+chainAddr)
	require.NoError(t, err)
	defer eth.Close()
	paidBy, err := eth.BlockNumber(ctx)
	require.NoError(t, err)

	env := envOf(map[string]string{
		"DATABASE_URL": "sqlite:" + filepath.Join(dataDir, devDatabaseFile),
		"RPC_URL":      "http://" + chainAddr,
		"PAY_TOKENS":   token[1] + ":" + token[2] + ":6",
	})
	// The ledger's follower writes the inflows once they have their
	// confirmations; until then the comparison is at an earlier block.
	var rec bytes.Buffer
	var recErr error
	waitUntil(t, 120*time.Second, 300*time.Millisecond, func() bool {
		rec.Reset()
		recErr = reconcile(ctx, []string{"--all"}, env, &rec)
		m := reconciledRe.FindStringSubmatch(rec.String())
		if recErr != nil || m == nil {
			return false
		}
		block, _ := strconv.ParseUint(m[1], 10, 64)
		return block >= paidBy
	}, func() string {
		return fmt.Sprintf("never reconciled past block %d: %v\n%s", paidBy, recErr, rec.String())
	})
	table := rec.String()
	require.Regexp(t, `payout\s+`+payout[1]+`\s+native\s+100000000000000000\s+100000000000000000\s+0\n`, table)
	require.Regexp(t, `payout\s+`+payout[1]+`\s+`+token[2]+`\s+12500000\s+12500000\s+0\n`, table)
	require.Regexp(t, `sweep\s+0x[0-9a-fA-F]{40}\s+native\s+(\d+)\s+(\d+)\s+0\n`, table)
	require.Regexp(t, `funder\s+0x[0-9a-fA-F]{40}\s+native\s+(\d+)\s+(\d+)\s+0\n`, table)
	require.Empty(t, warnings(out.String()), "no warning while payd dev ran:\n%s", out.String())

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err, "graceful shutdown returns nil")
	case <-time.After(30 * time.Second):
		t.Fatal("payd dev did not stop within 30 s of cancellation")
	}
}

// `payd reconcile` takes DATABASE_URL=sqlite:PATH; a file that is not
// there is an error, never an empty database made, and a directory is
// answered with the file payd dev keeps in it.
func TestReconcile_SQLiteDatabaseURL_MustNameAFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := filepath.Join(dir, "nothing.db")
	var out bytes.Buffer
	err := reconcile(context.Background(), nil, envOf(map[string]string{"DATABASE_URL": "sqlite:" + missing, "RPC_URL": "http://127.0.0.1:1"}), &out)
	require.ErrorContains(t, err, "DATABASE_URL")
	require.ErrorIs(t, err, os.ErrNotExist)
	require.NoFileExists(t, missing)

	err = reconcile(context.Background(), nil, envOf(map[string]string{"DATABASE_URL": "sqlite://" + dir, "RPC_URL": "http://127.0.0.1:1"}), &out)
	require.ErrorContains(t, err, filepath.Join(dir, devDatabaseFile))

	err = reconcile(context.Background(), nil, envOf(map[string]string{"DATABASE_URL": "sqlite:", "RPC_URL": "http://127.0.0.1:1"}), &out)
	var u usageError
	require.ErrorAs(t, err, &u)
	err = reconcile(context.Background(), nil, envOf(map[string]string{"RPC_URL": "http://127.0.0.1:1"}), &out)
	require.ErrorContains(t, err, "sqlite:PATH")
}
