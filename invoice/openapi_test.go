package invoice_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/store/problem"
)

// openAPIDoc is the part of an OpenAPI 3.1 document the tests read.
type openAPIDoc struct {
	OpenAPI    string                                `json:"openapi"`
	Servers    []map[string]string                   `json:"servers"`
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Schemas   map[string]*schema         `json:"schemas"`
		Responses map[string]json.RawMessage `json:"responses"`
	} `json:"components"`
}

type schema struct {
	Ref        string             `json:"$ref"`
	AllOf      []*schema          `json:"allOf"`
	Required   []string           `json:"required"`
	Properties map[string]*schema `json:"properties"`
	Enum       []string           `json:"enum"`
}

func loadOpenAPI(t *testing.T, b []byte) openAPIDoc {
	t.Helper()
	var doc openAPIDoc
	require.NoError(t, json.Unmarshal(b, &doc))
	return doc
}

var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

func documentedRoutes(doc openAPIDoc) []string {
	var out []string
	for path, item := range doc.Paths {
		for method := range item {
			if slices.Contains(httpMethods, method) {
				out = append(out, strings.ToUpper(method)+" "+path)
			}
		}
	}
	slices.Sort(out)
	return out
}

func TestOpenAPI_DescribesExactlyTheRoutes(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t, invoice.OpenAPI())
	require.True(t, strings.HasPrefix(doc.OpenAPI, "3.1."), doc.OpenAPI)
	registered := slices.Sorted(slices.Values(invoice.RoutePatterns()))
	require.Equal(t, registered, documentedRoutes(doc),
		"every route the handlers register is in invoice/openapi.json, and nothing else")

	// Each operation is complete: a unique operationId, responses, and
	// references that resolve.
	ids := map[string]bool{}
	for path, item := range doc.Paths {
		for method, raw := range item {
			var op struct {
				OperationID string                     `json:"operationId"`
				Responses   map[string]json.RawMessage `json:"responses"`
				Security    *[]map[string][]string     `json:"security"`
			}
			require.NoError(t, json.Unmarshal(raw, &op), "%s %s", method, path)
			require.NotEmpty(t, op.OperationID, "%s %s", method, path)
			require.False(t, ids[op.OperationID], "duplicate operationId %s", op.OperationID)
			ids[op.OperationID] = true
			require.NotEmpty(t, op.Responses, "%s %s", method, path)
			require.NotNil(t, op.Security, "%s %s states its security", method, path)
		}
	}
	var refs []string
	collectRefs(t, invoice.OpenAPI(), &refs)
	require.NotEmpty(t, refs)
	for _, ref := range refs {
		name, ok := strings.CutPrefix(ref, "#/components/schemas/")
		if ok {
			require.Contains(t, doc.Components.Schemas, name, ref)
			continue
		}
		name, ok = strings.CutPrefix(ref, "#/components/responses/")
		require.True(t, ok, "unexpected reference %s", ref)
		require.Contains(t, doc.Components.Responses, name, ref)
	}

	// The problem code enum is the one table every API shares.
	codes := doc.Components.Schemas["Problem"].Properties["code"].Enum
	require.ElementsMatch(t, problem.Codes(), codes)
}

func collectRefs(t *testing.T, b []byte, out *[]string) {
	var v any
	require.NoError(t, json.Unmarshal(b, &v))
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				if s, ok := c.(string); ok && k == "$ref" {
					*out = append(*out, s)
				}
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(v)
}

func TestOpenAPI_EveryDocumentedOperationIsServed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	doc := loadOpenAPI(t, invoice.OpenAPI())
	for _, rt := range documentedRoutes(doc) {
		method, path, _ := strings.Cut(rt, " ")
		res := e.do(method, strings.ReplaceAll(path, "{id}", "1"), "", "")
		// A served route answers with its own status (401 here, or 200):
		// never the mux's plain-text 404 or a 405.
		require.NotEqual(t, http.StatusMethodNotAllowed, res.Status, rt)
		require.NotEqual(t, "text/plain; charset=utf-8", res.Header.Get("Content-Type"), "%s: %s", rt, res.Body)
	}
}

func TestOpenAPI_ServedWithTheBaseURL(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	res := e.do("GET", "/v1/openapi.json", "", "")
	require.Equal(t, http.StatusOK, res.Status)
	require.Equal(t, "application/json", res.Header.Get("Content-Type"))
	doc := loadOpenAPI(t, res.Body)
	require.Equal(t, []map[string]string{{"url": "https://pay.example.com"}}, doc.Servers)
	require.Equal(t, documentedRoutes(loadOpenAPI(t, invoice.OpenAPI())), documentedRoutes(doc))
}

// properties resolves $ref and allOf into the object's properties and
// required members.
func (d openAPIDoc) properties(t *testing.T, s *schema) (props map[string]*schema, required []string) {
	t.Helper()
	props = map[string]*schema{}
	if s.Ref != "" {
		name := strings.TrimPrefix(s.Ref, "#/components/schemas/")
		ref, ok := d.Components.Schemas[name]
		require.True(t, ok, s.Ref)
		return d.properties(t, ref)
	}
	for _, sub := range s.AllOf {
		p, r := d.properties(t, sub)
		for k, v := range p {
			props[k] = v
		}
		required = append(required, r...)
	}
	for k, v := range s.Properties {
		props[k] = v
	}
	return props, append(required, s.Required...)
}

// requireConforms checks that every member of a response body is
// documented and every required member is present.
func requireConforms(t *testing.T, doc openAPIDoc, schemaName string, body []byte) {
	t.Helper()
	var obj map[string]any
	require.NoError(t, json.Unmarshal(body, &obj), "%s", body)
	props, required := doc.properties(t, &schema{Ref: "#/components/schemas/" + schemaName})
	for k := range obj {
		require.Contains(t, props, k, "%s: member %q is not documented: add it to invoice/openapi.json", schemaName, k)
	}
	for _, k := range required {
		require.Contains(t, obj, k, "%s: required member %q missing", schemaName, k)
	}
}

func TestOpenAPI_ResponsesMatchTheirSchemas(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	doc := loadOpenAPI(t, invoice.OpenAPI())
	created := e.do("POST", "/v1/admin/merchants", adminToken, `{"settlement_address":"0x70997970C51812dc3A010C7d01b50e0d17dc79C8"}`)
	requireConforms(t, doc, "MerchantCreated", created.Body)
	key := created.json(t)["api_key"].(string)
	requireConforms(t, doc, "Merchant", e.do("GET", "/v1/merchant", key, "").Body)
	requireConforms(t, doc, "MerchantWithWebhookSecret", e.do("POST", "/v1/merchant/webhook-secret/rotate", key, "").Body)
	rotated := e.do("POST", "/v1/merchant/api-key/rotate", key, "")
	requireConforms(t, doc, "MerchantWithAPIKey", rotated.Body)
	key = rotated.json(t)["api_key"].(string)

	res := e.createInvoice(key, "k", `{"amount_wei":"7","order_id":"o","description":"d","metadata":{"a":1}}`)
	requireConforms(t, doc, "InvoiceCreated", res.Body)
	id := res.json(t)["id"]
	token := res.json(t)["lookup_token"].(string)
	requireConforms(t, doc, "Invoice", e.do("GET", fmt.Sprintf("/v1/invoices/%v", id), key, "").Body)
	list := e.do("GET", "/v1/invoices", key, "")
	requireConforms(t, doc, "InvoiceList", list.Body)
	var page struct{ Data []json.RawMessage }
	require.NoError(t, json.Unmarshal(list.Body, &page))
	requireConforms(t, doc, "Invoice", page.Data[0])
	requireConforms(t, doc, "PublicInvoice", e.do("GET", "/v1/public/invoice", token, "").Body)
	requireConforms(t, doc, "Problem", e.do("GET", "/v1/invoices/x", key, "").Body)
	requireConforms(t, doc, "Problem", e.createInvoice(key, "k2", `{"amount_wei":1}`).Body)
}
