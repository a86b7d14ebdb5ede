package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRun_ServesInvoiceAPIAndOwnRoutes runs the example and creates an
// invoice through the mounted API.
func TestRun_ServesInvoiceAPIAndOwnRoutes(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-db", filepath.Join(t.TempDir(), "x.db")},
			func(string) string { return "" }, pw)
		pw.Close()
	}()
	lines := bufio.NewScanner(pr)
	var base, key string
	for lines.Scan() && (base == "" || key == "") {
		if m := regexp.MustCompile(`listening on (\S+)`).FindStringSubmatch(lines.Text()); m != nil {
			base = m[1]
		}
		if m := regexp.MustCompile(`api_key (\S+)`).FindStringSubmatch(lines.Text()); m != nil {
			key = m[1]
		}
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	require.NotEmpty(t, base)
	require.NotEmpty(t, key)

	resp, err := http.Get(base + "/shop/hello")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	req, _ := http.NewRequest("POST", base+"/v1/invoices", strings.NewReader(`{"amount_wei":"1000"}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Idempotency-Key", "k1")
	req.Header.Set("Content-Type", "application/json")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", body)
	require.Contains(t, string(body), `"payment_uri":"ethereum:0x`)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the example did not stop")
	}
}
