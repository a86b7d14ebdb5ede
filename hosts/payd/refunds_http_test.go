package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	"github.com/stretchr/testify/require"
)

// The refunds, payouts, keys, settings, ledger and reconciliation routes
// answer what /v1/openapi.json says, strictly (an undocumented member
// fails), with the scopes it names: live answers of one payd.
func TestOpenAPI_RefundsPayoutsAndLedger_LiveAnswersMatchTheDocument(t *testing.T) {
	t.Parallel()
	e := newEdgeEnv(t)
	d, err := libopenapi.NewDocument(e.do(t, "GET", "/v1/openapi.json", "").body)
	require.NoError(t, err)
	v, errs := validator.NewValidator(d, config.WithStrictMode())
	require.Empty(t, errs)
	merchant, operator := "Bearer "+e.apiKey, "Bearer "+e.admin
	check := func(method, path, body string, headers ...string) edgeResult {
		t.Helper()
		res := e.do(t, method, path, body, headers...)
		req, err := http.NewRequest(method, e.api+path, strings.NewReader(body))
		require.NoError(t, err)
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Add(headers[i], headers[i+1])
		}
		// JSON Lines: the document's schema is one line's; the validator
		// reads one JSON value, so each line is validated on its own.
		bodies := []string{string(res.body)}
		if strings.HasPrefix(res.header.Get("Content-Type"), "application/jsonl") {
			bodies = strings.Split(strings.TrimSuffix(string(res.body), "\n"), "\n")
		}
		for _, body := range bodies {
			resp := &http.Response{StatusCode: res.status, Header: res.header, Body: nopCloser{strings.NewReader(body)}, Request: req}
			ok, verrs := v.ValidateHttpResponse(req, resp)
			for _, ve := range verrs {
				t.Errorf("%s %s → %d: %s: %s", method, path, res.status, ve.Message, ve.Reason)
				for _, se := range ve.SchemaValidationErrors {
					t.Errorf("  %s at %s", se.Reason, se.FieldPath+" "+se.KeywordLocation)
				}
			}
			require.True(t, ok, "%s %s: %s", method, path, body)
		}
		return res
	}
	js := "application/json"

	res := check("POST", "/v1/merchant/api-keys", `{"name":"reader","scopes":["read"]}`, "Authorization", merchant, "Content-Type", js)
	require.Equal(t, http.StatusCreated, res.status, "%s", res.body)
	var key struct {
		APIKey string `json:"api_key"`
	}
	require.NoError(t, json.Unmarshal(res.body, &key))
	check("GET", "/v1/merchant/api-keys", "", "Authorization", merchant)
	res = check("POST", "/v1/payouts", `{"amount":"1","destination":"0x90F79bf6EB2c4f870365E785982E1f101E93b906"}`,
		"Authorization", "Bearer "+key.APIKey, "Content-Type", js, "Idempotency-Key", "p")
	require.Equal(t, http.StatusForbidden, res.status, "a read key makes no payout")

	check("PUT", "/v1/merchant/payout-settings", `{"assets":[{"asset":"ETH","approval_threshold":"1000000","daily_limit":"5000000000000000000"}],"allowlist_enabled":false}`,
		"Authorization", merchant, "Content-Type", js)
	check("GET", "/v1/merchant/payout-settings", "", "Authorization", merchant)
	// The sweep role records the payout wallet within a pass.
	waitUntil(t, 30*time.Second, 200*time.Millisecond, func() bool {
		return e.do(t, "GET", "/v1/merchant/payout-wallet", "", "Authorization", merchant).status == http.StatusOK
	}, func() string { return "the payout wallet was never recorded" })
	check("GET", "/v1/merchant/payout-wallet", "", "Authorization", merchant)

	res = check("POST", "/v1/payouts", `{"amount":"1000","destination":"0x90F79bf6EB2c4f870365E785982E1f101E93b906","reference":"r"}`,
		"Authorization", merchant, "Content-Type", js, "Idempotency-Key", "one")
	require.Equal(t, http.StatusCreated, res.status, "%s", res.body)
	res = check("POST", "/v1/payouts", `{"amount":"2000000","destination":"0x90F79bf6EB2c4f870365E785982E1f101E93b906","paid_by":"merchant"}`,
		"Authorization", merchant, "Content-Type", js, "Idempotency-Key", "mp")
	require.Equal(t, http.StatusCreated, res.status, "%s", res.body)
	var mp struct {
		ID int64 `json:"id"`
	}
	require.NoError(t, json.Unmarshal(res.body, &mp))
	check("GET", fmt.Sprintf("/v1/payouts/%d", mp.ID), "", "Authorization", merchant)
	check("GET", fmt.Sprintf("/v1/payouts/%d/qr.svg", mp.ID), "", "Authorization", merchant)
	res = check("POST", "/v1/payouts", `{"amount":"2000000","destination":"0x90F79bf6EB2c4f870365E785982E1f101E93b906"}`,
		"Authorization", merchant, "Content-Type", js, "Idempotency-Key", "big")
	var big struct {
		ID     int64  `json:"id"`
		Status string `json:"status"`
	}
	require.NoError(t, json.Unmarshal(res.body, &big))
	require.Equal(t, "AWAITING_APPROVAL", big.Status)
	check("POST", fmt.Sprintf("/v1/payouts/%d/approve", big.ID), "", "Authorization", merchant) // 403 approval_same_key
	check("POST", fmt.Sprintf("/v1/payouts/%d/reject", big.ID), "", "Authorization", merchant)
	check("POST", fmt.Sprintf("/v1/payouts/%d/cancel", big.ID), "", "Authorization", merchant) // 409
	res = check("POST", "/v1/payouts", `{"items":[{"idempotency_key":"a","amount":"3","destination":"0x90F79bf6EB2c4f870365E785982E1f101E93b906"},
		{"idempotency_key":"b","amount":"3","destination":"0x0000000000000000000000000000000000000000"}]}`,
		"Authorization", merchant, "Content-Type", js)
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	check("GET", "/v1/payouts", "", "Authorization", merchant)

	check("POST", fmt.Sprintf("/v1/invoices/%d/refunds", e.invoiceID), `{"reason":"full"}`,
		"Authorization", merchant, "Content-Type", js, "Idempotency-Key", "r") // 422 nothing_to_refund: nothing paid
	check("GET", fmt.Sprintf("/v1/invoices/%d/refunds", e.invoiceID), "", "Authorization", merchant)
	check("GET", "/v1/refunds", "", "Authorization", merchant)
	check("GET", "/v1/refunds/999", "", "Authorization", merchant)
	check("GET", "/v1/public/refund", "", "Authorization", "Bearer AAAAAAAAAAAAAAAAAAAAAA")
	check("GET", "/v1/ledger", "", "Authorization", merchant)
	res = check("GET", "/v1/ledger?format=jsonl", "", "Authorization", merchant)
	require.Equal(t, 2, strings.Count(string(res.body), "\n"), "the fiat invoice's two payments, a line each: %s", res.body)
	check("GET", "/v1/admin/reconciliation", "", "Authorization", operator)
	// The claim page is documented like the checkout page (its security
	// headers are not all declared: not validated strictly).
	res = e.do(t, "GET", "/claim", "")
	require.Equal(t, http.StatusOK, res.status)
	require.Contains(t, res.header.Get("Content-Security-Policy"), "default-src 'self'")
}

type nopCloser struct{ *strings.Reader }

func (nopCloser) Close() error { return nil }
