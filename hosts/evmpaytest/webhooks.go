package evmpaytest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/evmpay/evmpay/webhook"
)

// Receiver is a webhook endpoint for tests: a real HTTP server that
// verifies every delivery's Standard Webhooks signature and timestamp
// (webhook.Verify) before it reads it, and keeps what it received. A
// delivery that does not verify is answered 401 and counted in Bad; the
// test fails at its end if there was any.
type Receiver struct {
	// URL is the endpoint: the merchant's webhook_url.
	URL string

	tb       testing.TB
	mu       sync.Mutex
	secret   string
	received []webhook.Payload
	ids      map[string]bool
	bad      int
	changed  chan struct{}
}

// NewReceiver starts a Receiver that verifies with secret (whsec_…; ""
// until SetSecret: deliveries before it are answered 503, so they are
// retried), closed when the test ends.
func NewReceiver(tb testing.TB, secret string) *Receiver {
	tb.Helper()
	r := &Receiver{tb: tb, secret: secret, ids: map[string]bool{}, changed: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	r.URL = srv.URL + "/webhooks"
	tb.Cleanup(func() {
		srv.Close()
		if n := r.Bad(); n > 0 {
			tb.Errorf("evmpaytest: %d webhook deliveries did not verify", n)
		}
	})
	return r
}

// SetSecret sets the secret deliveries are verified with.
func (r *Receiver) SetSecret(secret string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.secret = secret
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, 1<<20))
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.secret == "" {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
		return
	}
	var p webhook.Payload
	if err != nil || webhook.Verify(r.secret, req.Header, body, 5*time.Minute, time.Now()) != nil || json.Unmarshal(body, &p) != nil {
		r.bad++
		http.Error(w, "invalid webhook", http.StatusUnauthorized)
		return
	}
	if !r.ids[p.ID] { // at least once: a repeat is the same event
		r.ids[p.ID] = true
		r.received = append(r.received, p)
		close(r.changed)
		r.changed = make(chan struct{})
	}
	w.WriteHeader(http.StatusNoContent)
}

// Payloads returns the verified webhooks received, once each, in the order
// they arrived.
func (r *Receiver) Payloads() []webhook.Payload {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]webhook.Payload(nil), r.received...)
}

// Bad is how many deliveries did not verify.
func (r *Receiver) Bad() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bad
}

// Wait waits for a verified webhook of type typ for which match (nil: any)
// holds, and returns it; it fails the test after a minute.
func (r *Receiver) Wait(typ string, match func(webhook.Payload) bool) webhook.Payload {
	r.tb.Helper()
	deadline := time.After(time.Minute)
	for {
		r.mu.Lock()
		changed := r.changed
		for _, p := range r.received {
			if p.Type == typ && (match == nil || match(p)) {
				r.mu.Unlock()
				return p
			}
		}
		r.mu.Unlock()
		select {
		case <-changed:
		case <-deadline:
			r.tb.Fatalf("evmpaytest: no %s webhook within a minute; received %d others", typ, len(r.Payloads()))
		}
	}
}

// About returns a match on the id of what the event is about: the
// invoice of invoice.* events, the refund or payout of the others.
func About(id int64) func(webhook.Payload) bool {
	return func(p webhook.Payload) bool {
		var v struct {
			ID int64 `json:"id"`
		}
		return json.Unmarshal(p.Data, &v) == nil && v.ID == id
	}
}
