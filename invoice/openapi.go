package invoice

import (
	_ "embed"
	"encoding/json"
	"fmt"

	"github.com/evmpay/evmpay/store/httpapi"
)

// openAPISource is the OpenAPI 3.1 description of every route in routes;
// TestOpenAPI_DescribesExactlyTheRoutes keeps the two in step.
//
//go:embed openapi.json
var openAPISource []byte

// OpenAPI returns the OpenAPI 3.1 document of the invoice API (the one
// served at /v1/openapi.json), without a servers list.
func OpenAPI() []byte { return httpapi.WithProblem(openAPISource) }

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
