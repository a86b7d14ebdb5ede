package invoice_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/store"
)

const oneEther = `{"amount_wei":"1000000000000000000"}`

func TestCreateInvoice_201WithEveryField(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.newMerchant()
	res := e.createInvoice(m.APIKey, "order-1",
		`{"amount_wei":"1500000000000000000","expires_in_seconds":600,"order_id":"order-1","description":"two coffees","metadata":{ "table": 4 }}`)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	require.Equal(t, "application/json", res.Header.Get("Content-Type"))
	require.Equal(t, "no-store", res.Header.Get("Cache-Control"))
	body := res.json(t)
	for _, k := range []string{"id", "status", "amount_wei", "paid_wei", "deposit_address", "chain_id", "payment_uri",
		"qr_png_url", "qr_svg_url", "lookup_token", "expires_at", "created_at", "updated_at", "sweep_status",
		"sweep_tx_hash", "sweep_error", "underpaid", "overpaid", "paid_late"} {
		require.Contains(t, body, k)
	}
	for _, k := range []string{"derivation_index", "lookup_token_hash", "version", "sweep_locked_until", "sweep_attempts"} {
		require.NotContains(t, body, k, "internal fields stay hidden")
	}
	require.Equal(t, "PENDING", body["status"])
	require.Equal(t, "1500000000000000000", body["amount_wei"])
	require.Equal(t, "0", body["paid_wei"])
	require.EqualValues(t, chainID, body["chain_id"])
	require.Equal(t, "NONE", body["sweep_status"])
	require.Nil(t, body["sweep_tx_hash"])
	require.Equal(t, "", body["sweep_error"])
	require.Equal(t, "order-1", body["order_id"])
	require.Equal(t, "two coffees", body["description"])
	require.Equal(t, map[string]any{"table": float64(4)}, body["metadata"])

	var inv createdInvoice
	require.NoError(t, json.Unmarshal(res.Body, &inv))
	require.True(t, inv.CreatedAt.Equal(t0))
	require.True(t, inv.ExpiresAt.Equal(t0.Add(10*time.Minute)))
	require.Equal(t, fmt.Sprintf("https://pay.example.com/v1/invoices/%d/qr.png", inv.ID), inv.QRPNGURL)
	require.Equal(t, fmt.Sprintf("https://pay.example.com/v1/invoices/%d/qr.svg", inv.ID), inv.QRSVGURL)
	require.Equal(t, fmt.Sprintf("https://pay.example.com/v1/invoices/%d", inv.ID), res.Header.Get("Location"))
	require.Regexp(t, `^[A-Za-z0-9_-]{22}$`, inv.LookupToken, "128 bits, base64url")

	// The deposit address is the deriver's first address, and the EIP-681
	// URI stored on the invoice names it, the chain and the amount.
	want, err := testDeriver(t).Address(0)
	require.NoError(t, err)
	require.Equal(t, want, inv.DepositAddress)
	uri, err := invoice.ParsePaymentURI(inv.PaymentURI)
	require.NoError(t, err)
	require.Equal(t, want, uri.Address)
	require.EqualValues(t, chainID, uri.ChainID)
	require.Equal(t, "1500000000000000000", uri.Value.Dec())

	stored, err := e.st.GetInvoice(ctx, inv.ID)
	require.NoError(t, err)
	require.Equal(t, inv.PaymentURI, stored.PaymentURI)
	require.EqualValues(t, 0, stored.DerivationIndex)
	require.Equal(t, invoice.LookupTokenHash(inv.LookupToken), stored.LookupTokenHash, "the token is stored as its SHA-256")
	require.JSONEq(t, `{"table":4}`, string(stored.Metadata))

	// A later read shows exactly what the create response showed, minus
	// the once-shown token.
	got := e.do("GET", fmt.Sprintf("/v1/invoices/%d", inv.ID), m.APIKey, "")
	require.Equal(t, http.StatusOK, got.Status)
	created := res.json(t)
	delete(created, "lookup_token")
	require.Equal(t, created, got.json(t))
}

func TestCreateInvoice_DefaultExpiryIs15Minutes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.newMerchant()
	inv := e.mustCreate(m.APIKey, "k", oneEther)
	require.True(t, inv.ExpiresAt.Equal(t0.Add(15*time.Minute)))
}

func TestCreateInvoice_EachInvoiceGetsTheNextDerivedAddress(t *testing.T) {
	bothStores(t, func(t *testing.T, e *env) {
		a, b := e.newMerchant(), e.newMerchant()
		seen := map[string]bool{}
		for i := 0; i < 6; i++ {
			key := a.APIKey
			if i%2 == 1 {
				key = b.APIKey
			}
			inv := e.mustCreate(key, fmt.Sprintf("k-%d", i), oneEther)
			want, err := testDeriver(t).Address(uint32(i))
			require.NoError(t, err)
			require.Equal(t, want, inv.DepositAddress, "invoice %d", i)
			require.False(t, seen[inv.DepositAddress.Hex()])
			seen[inv.DepositAddress.Hex()] = true
		}
	})
}

func TestCreateInvoice_MissingIdempotencyKey_400(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.newMerchant()
	requireProblem(t, e.do("POST", "/v1/invoices", m.APIKey, oneEther), 400, "idempotency_key_missing", "")
	requireProblem(t, e.createInvoice(m.APIKey, "   ", oneEther), 400, "idempotency_key_missing", "")
	requireProblem(t, e.createInvoice(m.APIKey, strings.Repeat("k", 256), oneEther), 400, "idempotency_key_invalid", "")
	requireProblem(t, e.do("POST", "/v1/invoices", m.APIKey, oneEther, "Idempotency-Key", "a", "Idempotency-Key", "b"),
		400, "idempotency_key_invalid", "")
	require.Empty(t, invoicesOf(t, e.st, m.ID))
}

func TestCreateInvoice_QuotedKeyIsTheSameKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.newMerchant()
	first := e.createInvoice(m.APIKey, `"abc-123"`, oneEther)
	require.Equal(t, http.StatusCreated, first.Status)
	again := e.createInvoice(m.APIKey, `abc-123`, oneEther)
	require.Equal(t, first.Body, again.Body)
}

func TestCreateInvoice_SameKeySameBody_ReplaysByteForByte(t *testing.T) {
	bothStores(t, func(t *testing.T, e *env) {
		m := e.newMerchant()
		first := e.createInvoice(m.APIKey, "order-7", oneEther)
		require.Equal(t, http.StatusCreated, first.Status)
		require.Empty(t, first.Header.Get("Idempotent-Replayed"))

		e.clock.Advance(23 * time.Hour) // still within the 24 h the key is kept
		for i := 0; i < 3; i++ {
			again := e.createInvoice(m.APIKey, "order-7", oneEther)
			require.Equal(t, first.Status, again.Status)
			require.Equal(t, first.Body, again.Body, "byte for byte, lookup_token included")
			require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
			require.Equal(t, first.Header.Get("Location"), again.Header.Get("Location"))
		}
		require.Len(t, invoicesOf(t, e.st, m.ID), 1)
	})
}

func TestCreateInvoice_SameKeyDifferentBody_422(t *testing.T) {
	bothStores(t, func(t *testing.T, e *env) {
		m := e.newMerchant()
		e.mustCreate(m.APIKey, "k", oneEther)
		requireProblem(t, e.createInvoice(m.APIKey, "k", `{"amount_wei":"2"}`), 422, "idempotency_key_reused", "")
		// Whitespace is a different body too: the fingerprint is over bytes.
		requireProblem(t, e.createInvoice(m.APIKey, "k", oneEther+" "), 422, "idempotency_key_reused", "")
		require.Len(t, invoicesOf(t, e.st, m.ID), 1)
	})
}

func TestCreateInvoice_KeysArePerMerchant(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b := e.newMerchant(), e.newMerchant()
	ia := e.mustCreate(a.APIKey, "shared-key", oneEther)
	ib := e.mustCreate(b.APIKey, "shared-key", oneEther)
	require.NotEqual(t, ia.ID, ib.ID)
	require.Equal(t, a.ID, ia.MerchantID)
	require.Equal(t, b.ID, ib.MerchantID)
}

func TestCreateInvoice_KeyInFlight_409(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.newMerchant()
	// Another request with this key and body is being processed: its
	// IN_FLIGHT record is committed and its lease runs.
	require.NoError(t, e.st.CreateIdempotencyRecord(ctx, store.IdempotencyRecord{
		MerchantID: m.ID, Key: "k", RequestHash: invoice.RequestFingerprint("POST", "/v1/invoices", []byte(oneEther)),
		Status: store.IdempotencyInFlight, LockedUntil: t0.Add(30 * time.Second), CreatedAt: t0,
		ExpiresAt: t0.Add(24 * time.Hour)}))
	res := e.createInvoice(m.APIKey, "k", oneEther)
	requireProblem(t, res, 409, "idempotency_key_in_flight", "")
	require.Equal(t, "1", res.Header.Get("Retry-After"))
	requireProblem(t, e.createInvoice(m.APIKey, "k", `{"amount_wei":"5"}`), 422, "idempotency_key_reused", "")
	require.Empty(t, invoicesOf(t, e.st, m.ID))

	// The request's process died: once its lease ends, a retry takes the
	// key over and creates the invoice, once.
	e.clock.Advance(31 * time.Second)
	first := e.createInvoice(m.APIKey, "k", oneEther)
	require.Equal(t, http.StatusCreated, first.Status, "%s", first.Body)
	again := e.createInvoice(m.APIKey, "k", oneEther)
	require.Equal(t, first.Body, again.Body)
	require.Len(t, invoicesOf(t, e.st, m.ID), 1)
}

func TestCreateInvoice_50ConcurrentSameKey_ExactlyOneInvoice(t *testing.T) {
	bothStores(t, func(t *testing.T, e *env) {
		m := e.newMerchant()
		const n = 50
		var wg sync.WaitGroup
		results := make([]result, n)
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				results[i] = e.createInvoice(m.APIKey, "one-key", `{"amount_wei":"42"}`)
			}()
		}
		close(start)
		wg.Wait()

		var created []byte
		counts := map[int]int{}
		for _, r := range results {
			counts[r.Status]++
			switch r.Status {
			case http.StatusCreated:
				if created == nil {
					created = r.Body
				}
				require.Equal(t, created, r.Body, "every 201 is the same response")
			case http.StatusConflict:
				requireProblem(t, r, 409, "idempotency_key_in_flight", "")
			default:
				t.Fatalf("unexpected %d: %s", r.Status, r.Body)
			}
		}
		t.Logf("statuses: %v", counts)
		require.NotNil(t, created, "statuses: %v", counts)
		invs := invoicesOf(t, e.st, m.ID)
		require.Len(t, invs, 1, "exactly one invoice for one key")
		next, err := e.st.NextDerivationIndex(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 1, next, "exactly one derivation index used, no gap")
		after := e.createInvoice(m.APIKey, "one-key", `{"amount_wei":"42"}`)
		require.Equal(t, created, after.Body)
	})
}

func TestCreateInvoice_FailedTransactionFreesTheKey(t *testing.T) {
	t.Parallel()
	st := newPostgres(t)
	e := newEnvOn(t, st)
	m := e.newMerchant()
	// Exhaust the wallet: the transaction fails after the key was taken.
	_, err := st.DB().Exec(`UPDATE counters SET value = 2147483648 WHERE name = 'derivation_index'`)
	require.NoError(t, err)
	requireProblem(t, e.createInvoice(m.APIKey, "k", oneEther), 500, "internal", "")
	_, err = st.GetIdempotencyRecord(ctx, m.ID, "k")
	require.ErrorIs(t, err, store.ErrNotFound, "nothing committed, so the key is free again")

	_, err = st.DB().Exec(`UPDATE counters SET value = 7 WHERE name = 'derivation_index'`)
	require.NoError(t, err)
	inv := e.mustCreate(m.APIKey, "k", oneEther)
	want, err := testDeriver(t).Address(7)
	require.NoError(t, err)
	require.Equal(t, want, inv.DepositAddress)
}

func TestCreateInvoice_StoredResponseIsSealed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.newMerchant()
	inv := e.mustCreate(m.APIKey, "k", oneEther)
	rec, err := e.st.GetIdempotencyRecord(ctx, m.ID, "k")
	require.NoError(t, err)
	require.Equal(t, store.IdempotencyDone, rec.Status)
	require.Equal(t, 201, *rec.ResponseStatus)
	require.Equal(t, inv.ID, *rec.InvoiceID)
	require.True(t, rec.ExpiresAt.Equal(t0.Add(24*time.Hour)), "kept 24 h")
	require.False(t, bytes.Contains(rec.ResponseBody, []byte(inv.LookupToken)), "the lookup token is not stored in clear")
	require.False(t, bytes.Contains(rec.ResponseBody, []byte(`"amount_wei"`)), "the response is sealed, not stored in clear")
	sum := sha256.Sum256([]byte(inv.LookupToken))
	require.False(t, bytes.Contains(rec.ResponseBody, sum[:]))
}

func TestCreateInvoice_ExpiredKeysArePurged(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.newMerchant()
	first := e.mustCreate(m.APIKey, "k", oneEther)
	n, err := e.svc.PurgeIdempotencyKeys(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	e.clock.Advance(24*time.Hour + time.Second)
	n, err = e.svc.PurgeIdempotencyKeys(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	second := e.mustCreate(m.APIKey, "k", oneEther)
	require.NotEqual(t, first.ID, second.ID, "after 24 h the key may be used again")
}

func TestCreateInvoice_InvalidBodies_400NamingTheField(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.newMerchant()
	big := `{"amount_wei":"1","metadata":{"k":"` + strings.Repeat("x", 5000) + `"}}`
	cases := []struct {
		name, body, code, field string
	}{
		{"not json", `amount=1`, "invalid_json", ""},
		{"array", `[1]`, "invalid_json", ""},
		{"empty", ``, "invalid_json", ""},
		{"trailing data", oneEther + `{}`, "invalid_json", ""},
		{"unknown field", `{"amount_wei":"1","amount":"1"}`, "unknown_field", "amount"},
		{"duplicate field", `{"amount_wei":"1","amount_wei":"2"}`, "duplicate_field", "amount_wei"},
		{"missing amount", `{"order_id":"x"}`, "missing_field", "amount_wei"},
		{"null amount", `{"amount_wei":null}`, "missing_field", "amount_wei"},
		{"number amount", `{"amount_wei":1000}`, "invalid_amount", "amount_wei"},
		{"zero", `{"amount_wei":"0"}`, "invalid_amount", "amount_wei"},
		{"negative", `{"amount_wei":"-1"}`, "invalid_amount", "amount_wei"},
		{"fraction", `{"amount_wei":"1.5"}`, "invalid_amount", "amount_wei"},
		{"exponent", `{"amount_wei":"1e18"}`, "invalid_amount", "amount_wei"},
		{"hex", `{"amount_wei":"0x10"}`, "invalid_amount", "amount_wei"},
		{"leading zero", `{"amount_wei":"01"}`, "invalid_amount", "amount_wei"},
		{"spaces", `{"amount_wei":" 1"}`, "invalid_amount", "amount_wei"},
		{"over the supply cap", `{"amount_wei":"1000000000000000000000000001"}`, "invalid_amount", "amount_wei"},
		{"over uint256", `{"amount_wei":"` + strings.Repeat("9", 79) + `"}`, "invalid_amount", "amount_wei"},
		{"expiry too short", `{"amount_wei":"1","expires_in_seconds":59}`, "invalid_field", "expires_in_seconds"},
		{"expiry too long", `{"amount_wei":"1","expires_in_seconds":604801}`, "invalid_field", "expires_in_seconds"},
		{"expiry fraction", `{"amount_wei":"1","expires_in_seconds":60.5}`, "invalid_field", "expires_in_seconds"},
		{"expiry string", `{"amount_wei":"1","expires_in_seconds":"60"}`, "invalid_field", "expires_in_seconds"},
		{"order id type", `{"amount_wei":"1","order_id":5}`, "invalid_field", "order_id"},
		{"order id too long", `{"amount_wei":"1","order_id":"` + strings.Repeat("x", 201) + `"}`, "invalid_field", "order_id"},
		{"order id NUL", `{"amount_wei":"1","order_id":"a\u0000b"}`, "unsafe_json", "order_id"},
		{"description too long", `{"amount_wei":"1","description":"` + strings.Repeat("x", 1001) + `"}`, "invalid_field", "description"},
		{"metadata array", `{"amount_wei":"1","metadata":[1]}`, "invalid_field", "metadata"},
		{"metadata string", `{"amount_wei":"1","metadata":"x"}`, "invalid_field", "metadata"},
		{"metadata too big", big, "invalid_field", "metadata"},
		{"not UTF-8", "{\"amount_wei\":\"1\",\"metadata\":{\"k\":\"\xff\xfe\"}}", "invalid_json", ""},
	}
	for i, tc := range cases {
		res := e.createInvoice(m.APIKey, fmt.Sprintf("k-%d", i), tc.body)
		requireProblem(t, res, 400, tc.code, tc.field)
		if tc.field != "" {
			require.Contains(t, res.json(t)["detail"], tc.field, tc.name)
		}
	}
	require.Empty(t, invoicesOf(t, e.st, m.ID))
	// A refused request did not use up its key.
	e.mustCreate(m.APIKey, "k-0", oneEther)
}

func TestCreateInvoice_AmountBounds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.newMerchant()
	inv := e.mustCreate(m.APIKey, "max", `{"amount_wei":"1000000000000000000000000000"}`)
	require.Equal(t, "1000000000000000000000000000", inv.AmountWei.String(), "10^27 is allowed")
	inv = e.mustCreate(m.APIKey, "min", `{"amount_wei":"1"}`)
	require.Equal(t, "1", inv.AmountWei.String())
}

func TestCreateInvoice_BodyTooLarge_413(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *invoice.Config) { c.MaxBodyBytes = 2048 })
	m := e.newMerchant()
	body := `{"amount_wei":"1","description":"` + strings.Repeat("x", 3000) + `"}`
	requireProblem(t, e.createInvoice(m.APIKey, "k", body), 413, "body_too_large", "")

	// Without a Content-Length (chunked) the limit still holds.
	req, err := http.NewRequestWithContext(ctx, "POST", e.srv.URL+"/v1/invoices", struct{ *strings.Reader }{strings.NewReader(body)})
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+m.APIKey)
	req.Header.Set("Idempotency-Key", "k2")
	requireProblem(t, send(t, req), 413, "body_too_large", "")
	require.Empty(t, invoicesOf(t, e.st, m.ID))
}
