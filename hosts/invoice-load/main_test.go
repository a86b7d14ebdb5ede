package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store/postgres/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestRun_CreatesInvoicesAndChecksTheDatabase(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), []string{"-db", pgtest.AdminURL(t), "-duration", "300ms", "-warmup", "100ms",
		"-conns", "4", "-pool", "4", "-params", "application_name=invoice-load-test"}, &out)
	require.NoError(t, err, out.String())
	require.Contains(t, out.String(), "invoices/s")
	require.Contains(t, out.String(), "latency p50")
	require.Contains(t, out.String(), "without a gap")
}

func TestRun_FiatPriced_CreatesQuotedInvoices(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), []string{"-db", pgtest.AdminURL(t), "-duration", "300ms", "-warmup", "100ms",
		"-conns", "2", "-pool", "2", "-fiat", "EUR"}, &out)
	require.NoError(t, err, out.String())
	require.Contains(t, out.String(), "priced at 49.90 EUR, quoted in ETH and USDC")
	require.Contains(t, out.String(), "without a gap")
}
