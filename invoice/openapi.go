package invoice

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/evmpay/evmpay/store/httpapi"
)

// openAPISource is the OpenAPI 3.1 description of every route in routes;
// TestOpenAPI_DescribesExactlyTheRoutes keeps the two in step.
//
//go:embed openapi.json
var openAPISource []byte

// openAPIRefunds describes outboundRoutes: refunds, payouts, scoped keys,
// payout settings, the ledger and the claim page's reads.
//
//go:embed openapi_refunds.json
var openAPIRefunds []byte

// OpenAPI returns the OpenAPI 3.1 document of the invoice API (the one
// served at /v1/openapi.json), without a servers list. Every merchant
// operation's security names the scope its API key must hold, from the
// routes table itself (withScopes).
func OpenAPI() []byte {
	merged, err := httpapi.MergeOpenAPI(openAPISource, openAPIRefunds)
	if err != nil {
		panic("invoice: openapi: " + err.Error()) // embedded documents: a test loads them
	}
	return httpapi.WithProblem(withScopes(merged))
}

// withScopes writes each merchant route's scope into its operation's
// security requirement ({"apiKey": ["refunds"]}; OpenAPI 3.1 lets a
// requirement list the roles an http scheme needs), so that the document
// shows exactly what the handlers enforce.
func withScopes(doc []byte) []byte {
	var d map[string]json.RawMessage
	if err := json.Unmarshal(doc, &d); err != nil {
		panic("invoice: openapi: " + err.Error())
	}
	var paths map[string]map[string]map[string]json.RawMessage
	if err := json.Unmarshal(d["paths"], &paths); err != nil {
		panic("invoice: openapi paths: " + err.Error())
	}
	for _, rt := range append(append([]route{}, routes...), outboundRoutes...) {
		if rt.scope == scopePublic || rt.scope == scopeOperator {
			continue
		}
		op := paths[rt.path][strings.ToLower(rt.method)]
		if op == nil {
			continue // TestOpenAPI_DescribesExactlyTheRoutes reports it
		}
		op["security"], _ = json.Marshal([]map[string][]string{{"apiKey": {rt.scope}}})
	}
	d["paths"], _ = json.Marshal(paths)
	out, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		panic("invoice: openapi: " + err.Error())
	}
	return out
}

// openAPIDocument returns the document served at /v1/openapi.json: src
// (the embedded one when nil), with a servers entry when the base URL is
// known.
func openAPIDocument(src []byte, baseURL string) ([]byte, error) {
	if src == nil {
		src = OpenAPI()
	}
	if baseURL == "" {
		return src, nil
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(src, &doc); err != nil {
		return nil, fmt.Errorf("invoice: openapi.json: %w", err)
	}
	servers, err := json.Marshal([]map[string]string{{"url": baseURL}})
	if err != nil {
		return nil, err
	}
	doc["servers"] = servers
	return json.MarshalIndent(doc, "", "  ")
}
