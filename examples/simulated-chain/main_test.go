package main

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRun_InvoiceGoesPendingPaidConfirmed is the pattern to copy: a real
// EVM, a real store, blocks mined by the test.
func TestRun_InvoiceGoesPendingPaidConfirmed(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), filepath.Join(t.TempDir(), "evmpay.db"), &out))
	require.Regexp(t, `(?s)invoice 1: PENDING, pay 250000 wei\n`+
		`after block \d+: PAID \(paid 250000 wei\)\n`+
		`after block \d+: CONFIRMED \(paid 250000 wei\)\n$`, out.String())
}
