package sweep

import (
	_ "embed"

	"github.com/evmpay/evmpay/store/httpapi"
)

//go:embed openapi.json
var adminOpenAPISource []byte

// AdminOpenAPI returns the OpenAPI 3.1 document of the operator endpoint
// (the route Admin.Register adds), for a host that serves one merged
// document (httpapi.MergeOpenAPI). A host's route test keeps the two in
// step.
func AdminOpenAPI() []byte { return httpapi.WithProblem(adminOpenAPISource) }
