package indexer

import (
	_ "embed"

	"github.com/evmpay/evmpay/store/httpapi"
)

//go:embed openapi.json
var readAPIOpenAPISource []byte

// ReadAPIOpenAPI returns the OpenAPI 3.1 document of the read API (the
// routes ReadAPI.Register adds), for a host that serves one merged document
// (httpapi.MergeOpenAPI). A host's route test keeps the two in step.
func ReadAPIOpenAPI() []byte { return httpapi.WithProblem(readAPIOpenAPISource) }
