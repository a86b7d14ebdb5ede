// Command webhook-receiver is a minimal merchant endpoint for evmpay
// webhooks: it verifies each webhook's Standard Webhooks signature and
// timestamp with webhook.Verifier, ignores repeats of a webhook-id it has
// already processed (delivery is at least once), and prints the invoice
// each event carries.
//
//	WEBHOOK_SECRET=whsec_… go run ./examples/webhook-receiver -addr 127.0.0.1:8090
//
// then set the merchant's webhook_url to http://127.0.0.1:8090/webhooks.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/evmpay/evmpay/webhook"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "webhook-receiver:", err)
		os.Exit(1)
	}
}

// run serves until ctx is cancelled, printing the address it listens on
// first.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := flag.NewFlagSet("webhook-receiver", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8090", "listen address")
	path := fs.String("path", "/webhooks", "URL path of the endpoint")
	if err := fs.Parse(args); err != nil {
		return err
	}
	h, err := newReceiver(getenv("WEBHOOK_SECRET"), stdout)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("POST "+*path, h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	fmt.Fprintf(stdout, "listening on http://%s%s\n", ln.Addr(), *path)
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// receiver verifies and handles webhooks.
type receiver struct {
	verifier *webhook.Verifier
	out      io.Writer

	mu   sync.Mutex
	seen map[string]bool // webhook-ids processed; a real receiver keeps them in its database
}

func newReceiver(secret string, out io.Writer) (*receiver, error) {
	if secret == "" {
		return nil, errors.New("set WEBHOOK_SECRET to the merchant's webhook secret (whsec_…)")
	}
	v, err := webhook.NewVerifier(secret)
	if err != nil {
		return nil, err
	}
	return &receiver{verifier: v, out: out, seen: map[string]bool{}}, nil
}

// invoice is the part of the event data this receiver uses.
type invoice struct {
	ID        int64  `json:"id"`
	Status    string `json:"status"`
	AmountWei string `json:"amount_wei"`
	PaidWei   string `json:"paid_wei"`
	OrderID   string `json:"order_id"`
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Verify the exact bytes received, before parsing anything.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
		return
	}
	if err := rc.verifier.Verify(r.Header, body); err != nil {
		// A 4xx tells evmpay not to retry; the delivery stays replayable.
		http.Error(w, "invalid signature", http.StatusUnauthorized)
		return
	}
	id := r.Header.Get(webhook.HeaderID)
	rc.mu.Lock()
	dup := rc.seen[id]
	rc.mu.Unlock()
	if dup {
		fmt.Fprintf(rc.out, "%s already processed\n", id)
		w.WriteHeader(http.StatusOK)
		return
	}
	var p webhook.Payload
	var inv invoice
	if err := json.Unmarshal(body, &p); err != nil || json.Unmarshal(p.Data, &inv) != nil {
		http.Error(w, "unexpected body", http.StatusUnprocessableEntity)
		return
	}
	// Act on the event here (mark the order paid, …). Answer 2xx only once
	// that is done and durable: evmpay retries anything else.
	fmt.Fprintf(rc.out, "%s %s invoice %d order %q status %s paid %s/%s wei\n",
		p.ID, p.Type, inv.ID, inv.OrderID, inv.Status, inv.PaidWei, inv.AmountWei)
	rc.mu.Lock()
	rc.seen[id] = true
	rc.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}
