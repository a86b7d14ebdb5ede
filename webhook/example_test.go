package webhook_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/sqlite"
	"github.com/evmpay/evmpay/webhook"
)

// A receiver checks every webhook before trusting it. Here, the published
// Standard Webhooks test vector.
func ExampleVerify() {
	secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	body := []byte(`{"test": 2432232314}`)
	headers := http.Header{}
	headers.Set("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
	headers.Set("webhook-timestamp", "1614265330")
	headers.Set("webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
	received := time.Unix(1614265330, 0).Add(2 * time.Second)

	fmt.Println(webhook.Verify(secret, headers, body, 5*time.Minute, received))
	fmt.Println(webhook.Verify(secret, headers, []byte(`{"test": 1}`), 5*time.Minute, received))
	fmt.Println(webhook.Verify(secret, headers, body, 5*time.Minute, received.Add(time.Hour)))
	// Output:
	// <nil>
	// webhook: no v1 signature matches
	// webhook: webhook-timestamp is older than the tolerance
}

func ExampleSign() {
	sig, err := webhook.Sign("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek",
		time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	fmt.Println(sig, err)
	// Output: v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE= <nil>
}

// A Go receiver: read the body (bounded), verify it, deduplicate on
// webhook-id, then act on the invoice.
func ExampleVerifier() {
	v, err := webhook.NewVerifier("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		log.Fatal(err)
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
			return
		}
		if err := v.Verify(r.Header, body); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized) // 4xx: evmpay does not retry
			return
		}
		// if seen(r.Header.Get("webhook-id")) { w.WriteHeader(http.StatusOK); return }
		w.WriteHeader(http.StatusNoContent)
	})

	body := `{"id":"evt_1","type":"invoice.paid","created_at":"2026-11-21T12:00:00Z","data":{"id":1,"status":"PAID"}}`
	now := time.Now()
	sig, _ := webhook.Sign("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "evt_1", now, []byte(body))
	req := httptest.NewRequest(http.MethodPost, "/webhooks/evmpay", strings.NewReader(body))
	req.Header.Set("webhook-id", "evt_1")
	req.Header.Set("webhook-timestamp", fmt.Sprint(now.Unix()))
	req.Header.Set("webhook-signature", sig)
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, req)
	fmt.Println(rec.Code)
	// Output: 204
}

type credentials struct{}

func (credentials) WebhookSecret(store.Merchant) (string, error) {
	return "", errors.New("a host passes *invoice.Credentials")
}

type authenticator struct{}

func (authenticator) Authenticate(*http.Request) (store.Merchant, error) {
	return store.Merchant{}, errors.New("a host passes the invoice package's authenticator")
}

// A host runs the dispatcher as a worker and mounts the deliveries API on
// its mux.
func ExampleNew() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := sqlite.Open(ctx, "evmpay.db", sqlite.Config{}) // or postgres.Open
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	d, err := webhook.New(st, credentials{}, webhook.Config{BlockPrivateNetworks: true})
	if err != nil {
		log.Fatal(err)
	}
	go func() { _ = d.Run(ctx) }()

	api, err := webhook.NewDeliveriesAPI(st, authenticator{}, webhook.DeliveriesAPIConfig{})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	api.Register(mux)
	log.Fatal(http.ListenAndServe("127.0.0.1:8080", mux))
}
