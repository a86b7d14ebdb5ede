// Command webhook-receiver is a minimal merchant endpoint for evmpay
// webhooks: it verifies each webhook's Standard Webhooks signature and
// timestamp (webhook.Verifier), ignores a webhook-id it has already
// processed (delivery is at least once), and prints the invoice it carries.
//
//	WEBHOOK_SECRET=whsec_… go run ./examples/webhook-receiver -addr 127.0.0.1:8090
//
// then set the merchant's webhook_url to http://127.0.0.1:8090/webhooks.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/evmpay/evmpay/webhook"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8090", "listen address")
	flag.Parse()
	h, err := newReceiver(os.Getenv("WEBHOOK_SECRET"), os.Stdout)
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /webhooks", h)
	srv := &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	log.Fatal(srv.ListenAndServe())
}

// newReceiver verifies and handles webhooks signed with secret (whsec_…).
func newReceiver(secret string, out io.Writer) (http.Handler, error) {
	v, err := webhook.NewVerifier(secret)
	if err != nil {
		return nil, fmt.Errorf("WEBHOOK_SECRET, the merchant's webhook secret: %w", err)
	}
	var mu sync.Mutex
	seen := map[string]bool{} // webhook-ids processed: a real receiver keeps them in its database
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Verify the exact bytes received, before parsing anything.
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil || v.Verify(r.Header, body) != nil {
			http.Error(w, "invalid signature", http.StatusUnauthorized) // a 4xx is not retried; the delivery stays replayable
			return
		}
		var p webhook.Payload
		var inv struct { // the members of the invoice this receiver uses
			ID        int64  `json:"id"`
			Status    string `json:"status"`
			OrderID   string `json:"order_id"`
			AmountWei string `json:"amount_wei"`
			PaidWei   string `json:"paid_wei"`
		}
		if json.Unmarshal(body, &p) != nil || json.Unmarshal(p.Data, &inv) != nil {
			http.Error(w, "unexpected body", http.StatusUnprocessableEntity)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if seen[p.ID] {
			fmt.Fprintf(out, "%s already processed\n", p.ID)
			return
		}
		// Act on the event here (mark the order paid, …); answer 2xx only
		// once that is durable: evmpay retries anything else.
		fmt.Fprintf(out, "%s %s invoice %d order %q status %s paid %s/%s wei\n", p.ID, p.Type, inv.ID, inv.OrderID, inv.Status, inv.PaidWei, inv.AmountWei)
		seen[p.ID] = true
		w.WriteHeader(http.StatusNoContent)
	}), nil
}
