package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	"github.com/pb33f/libopenapi-validator/schema_validation"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/indexer"
	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/store/httpapi"
	"github.com/evmpay/evmpay/sweep"
	"github.com/evmpay/evmpay/webhook"
)

// documentedOperations lists "METHOD /path" for every operation of an
// OpenAPI document.
func documentedOperations(t *testing.T, doc []byte) []string {
	t.Helper()
	var d struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(doc, &d))
	var out []string
	for path, item := range d.Paths {
		for method := range item {
			if slices.Contains([]string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}, method) {
				out = append(out, strings.ToUpper(method)+" "+path)
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestOpenAPI_DocumentsExactlyTheRegisteredRoutes is the check that keeps
// /v1/openapi.json true: every route payd registers on any of its HTTP
// listeners is documented, and nothing is documented that is not served.
// A failure names the route: add its operation to the openapi.json of the
// package that serves it (invoice, webhook, indexer, sweep) or of payd.
func TestOpenAPI_DocumentsExactlyTheRegisteredRoutes(t *testing.T) {
	t.Parallel()
	e := newEdgeEnv(t)
	res := e.do(t, "GET", "/v1/openapi.json", "")
	require.Equal(t, http.StatusOK, res.status)
	require.Equal(t, "application/json", res.header.Get("Content-Type"))

	// A pattern without a method is a handler that answers every method
	// (and, ending in "/", every sub-path) itself: only the checkout page,
	// so that its own 404 and 405 carry its security headers. Its
	// operations are documented per method under that path.
	var registered, whole []string
	for _, p := range append(e.a.mux.Patterns(), e.a.metricsMux.Patterns()...) {
		if strings.Contains(p, " /") {
			registered = append(registered, p)
		} else {
			whole = append(whole, p)
		}
	}
	// The merchant dashboard (/dashboard/, HTML pages) is no API and answers
	// its own 404s too.
	pages := []string{"/checkout", "/checkout/", "/claim"}
	if e.a.dashboard != nil {
		pages = append(pages, "/dashboard/")
	}
	require.ElementsMatch(t, pages, whole, "only the checkout, claim and dashboard pages register a pattern without a method: every other route is documented per method")
	covers := func(op string) bool {
		_, path, _ := strings.Cut(op, " ")
		for _, p := range whole {
			if path == p || strings.HasSuffix(p, "/") && strings.HasPrefix(path, p) {
				return true
			}
		}
		return false
	}
	slices.Sort(registered)
	documented := documentedOperations(t, res.body)
	for _, r := range registered {
		require.Contains(t, documented, r, "%s is served but not in /v1/openapi.json: document it in the openapi.json of the package that serves it", r)
	}
	for _, p := range whole {
		require.True(t, slices.ContainsFunc(documented, func(op string) bool {
			return strings.HasSuffix(op, " "+p) || strings.HasSuffix(p, "/") && strings.Contains(op, " "+p)
		}),
			"%s is served but none of its operations is in /v1/openapi.json", p)
	}
	for _, d := range documented {
		require.True(t, slices.Contains(registered, d) || covers(d), "%s is in /v1/openapi.json but no listener serves it", d)
	}
}

// TestOpenAPI_ValidatedByAnIndependentValidator validates the served
// document, and each package's part, against the OpenAPI 3.1 schema with
// pb33f's libopenapi-validator, then checks live responses of payd against
// the document with the same library, strictly: an undocumented response
// member fails, so a new field needs its schema entry.
func TestOpenAPI_ValidatedByAnIndependentValidator(t *testing.T) {
	t.Parallel()
	e := newEdgeEnv(t)
	served := e.do(t, "GET", "/v1/openapi.json", "").body
	for name, doc := range map[string][]byte{
		"served": served, "payd": httpapi.WithProblem(paydOpenAPI), "invoice": invoice.OpenAPI(), "webhook": webhook.OpenAPI(),
		"indexer": indexer.ReadAPIOpenAPI(), "sweep": sweep.AdminOpenAPI(),
	} {
		d, err := libopenapi.NewDocument(doc)
		require.NoError(t, err, name)
		require.True(t, strings.HasPrefix(d.GetVersion(), "3.1"), "%s: %s", name, d.GetVersion())
		ok, errs := schema_validation.ValidateOpenAPIDocument(d)
		for _, e := range errs {
			t.Errorf("%s: %s: %s", name, e.Message, e.Reason)
			for _, se := range e.SchemaValidationErrors {
				t.Errorf("  %s at %s", se.Reason, se.FieldPath+" "+se.KeywordLocation)
			}
		}
		require.True(t, ok, "%s is not a valid OpenAPI 3.1 document", name)
		_, buildErrs := d.BuildV3Model()
		require.Empty(t, buildErrs, "%s: every reference resolves", name)
	}

	// Live answers conform to the document.
	d, err := libopenapi.NewDocument(served)
	require.NoError(t, err)
	// Strict: a member the document does not declare fails too, so a new
	// response field must be documented.
	v, errs := validator.NewValidator(d, config.WithStrictMode())
	require.Empty(t, errs)
	merchant, operator := "Bearer "+e.apiKey, "Bearer "+e.admin
	type call struct {
		method, path, body string
		headers            []string
	}
	// validate sends c and requires its answer to conform; it returns the
	// answer's status.
	validate := func(c call) int {
		req, err := http.NewRequest(c.method, e.api+c.path, strings.NewReader(c.body))
		require.NoError(t, err)
		for i := 0; i+1 < len(c.headers); i += 2 {
			req.Header.Add(c.headers[i], c.headers[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		// The validator reads the request body again: give it a fresh one.
		check, err := http.NewRequest(c.method, e.api+c.path, strings.NewReader(c.body))
		require.NoError(t, err)
		check.Header = req.Header
		ok, verrs := v.ValidateHttpResponse(check, resp)
		resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); strings.Contains(ct, "json") {
			require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"), "%s %s: a JSON answer is never sniffed", c.method, c.path)
		}
		for _, ve := range verrs {
			t.Errorf("%s %s → %d: %s: %s", c.method, c.path, resp.StatusCode, ve.Message, ve.Reason)
			for _, se := range ve.SchemaValidationErrors {
				t.Errorf("  %s at %s", se.Reason, se.FieldPath+" "+se.KeywordLocation)
			}
		}
		require.True(t, ok, "%s %s: the response does not match /v1/openapi.json", c.method, c.path)
		return resp.StatusCode
	}
	for _, c := range []call{
		{"GET", "/healthz", "", nil},
		{"GET", "/readyz", "", nil},
		{"GET", "/v1/merchant", "", []string{"Authorization", merchant}},
		{"GET", "/v1/invoices", "", []string{"Authorization", merchant}},
		{"GET", "/v1/invoices?status=EXPIRED;x", "", []string{"Authorization", merchant}},
		{"GET", "/v1/webhook-deliveries", "", []string{"Authorization", merchant}},
		{"GET", "/v1/webhook-deliveries/1", "", []string{"Authorization", merchant}},
		{"POST", "/v1/webhook-deliveries/replay", `{"since":"2026-01-01T00:00:00Z"}`, []string{"Authorization", merchant, "Content-Type", "application/json"}},
		{"POST", "/v1/webhook-deliveries/replay", `{"since":"2026-01-01T00:00:00Z"}`, []string{"Authorization", merchant, "Content-Type", "text/plain"}},
		{"GET", "/v1/admin/merchants/1", "", []string{"Authorization", operator}},
		{"GET", "/v1/admin/status", "", []string{"Authorization", operator}},
		{"GET", "/v1/admin/status", "", nil},
		{"POST", "/v1/admin/sweeps/retry", `{"invoice_ids":[1,999999]}`, []string{"Authorization", operator, "Content-Type", "application/json"}},
		{"GET", "/v1/public/invoice", "", []string{"Authorization", "Bearer " + e.lookupToken}},
		{"GET", "/v1/public/invoice", "", []string{"Authorization", "Bearer " + e.tokenLookupToken}},
		{"GET", fmt.Sprintf("/v1/invoices/%d", e.invoiceID), "", []string{"Authorization", merchant}},
		{"GET", fmt.Sprintf("/v1/invoices/%d", e.tokenInvoiceID), "", []string{"Authorization", merchant}},
		// An invoice priced in a fiat currency: price, quotes, paid value,
		// tolerance, payments with values; its public read; a new one; a
		// merchant's tolerance; bad prices.
		{"GET", fmt.Sprintf("/v1/invoices/%d", e.fiatInvoiceID), "", []string{"Authorization", merchant}},
		{"GET", "/v1/public/invoice", "", []string{"Authorization", "Bearer " + e.fiatLookupToken}},
		{"POST", "/v1/invoices", `{"price":{"amount":"12.50","currency":"USD"},"accept":["USDC"]}`,
			[]string{"Authorization", merchant, "Content-Type", "application/json", "Idempotency-Key", "openapi-fiat"}},
		{"POST", "/v1/invoices", `{"price":{"amount":"12.505","currency":"USD"}}`,
			[]string{"Authorization", merchant, "Content-Type", "application/json", "Idempotency-Key", "openapi-fiat-bad"}},
		{"PATCH", "/v1/merchant", `{"underpayment_tolerance":{"percent":"0.5","amounts":[{"amount":"0.50","currency":"EUR"}]}}`,
			[]string{"Authorization", merchant, "Content-Type", "application/json"}},
		{"GET", "/v1/blocks/latest", "", nil},
		{"GET", "/v1/blocks/0", "", nil},
		{"GET", "/v1/addresses/0x70997970C51812dc3A010C7d01b50e0d17dc79C8/transactions?limit=2", "", nil},
	} {
		validate(c)
	}

	// The chain's stop recorded (as a process that runs its parts
	// elsewhere records it): a new invoice is refused with a documented
	// 503.
	require.NoError(t, e.a.st.SetChainStop(t.Context(), problemReorgTooDeep, time.Now()))
	n := 0
	waitUntil(t, 3*stopReadEvery, 100*time.Millisecond, func() bool {
		n++
		return validate(call{"POST", "/v1/invoices", `{"amount_wei":"1"}`, []string{"Authorization", merchant,
			"Content-Type", "application/json", "Idempotency-Key", fmt.Sprint("openapi-stopped-", n)}}) == http.StatusServiceUnavailable
	}, func() string { return "a 503 for an invoice on the stopped chain" })
	// An invoice opened before the stop: its public read, as documented,
	// names the chain in delayed_chains.
	require.Equal(t, http.StatusOK, validate(call{"GET", "/v1/public/invoice", "", []string{"Authorization", "Bearer " + e.lookupToken}}))
	req, err := http.NewRequest("GET", e.api+"/v1/public/invoice", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+e.lookupToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var pub struct {
		ChainID       uint64   `json:"chain_id"`
		DelayedChains []uint64 `json:"delayed_chains"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&pub))
	require.Equal(t, []uint64{pub.ChainID}, pub.DelayedChains)
}
