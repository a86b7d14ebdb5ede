package webhook

import (
	_ "embed"

	"github.com/evmpay/evmpay/store/httpapi"
)

//go:embed openapi.json
var openAPISource []byte

// OpenAPI returns the OpenAPI 3.1 document of the deliveries API (the
// routes Register adds), for a host that serves one merged document
// (httpapi.MergeOpenAPI). A host's route test keeps the two in step.
func OpenAPI() []byte { return httpapi.WithProblem(openAPISource) }
