package main

import (
	_ "embed"

	"github.com/evmpay/evmpay/indexer"
	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/store/httpapi"
	"github.com/evmpay/evmpay/sweep"
	"github.com/evmpay/evmpay/webhook"
)

// paydOpenAPI is payd's own part of its OpenAPI document (health,
// readiness, status, metrics) and the document's info: the base the
// packages' parts are merged into.
//
//go:embed openapi.json
var paydOpenAPI []byte

// openAPIDocument is the one OpenAPI 3.1 document of everything payd
// serves over HTTP, served at /v1/openapi.json: payd's part and each
// package's. TestOpenAPI_DocumentsExactlyTheRegisteredRoutes keeps it equal
// to the routes payd registers: a new route needs its operation in the
// openapi.json of the package that serves it.
func openAPIDocument() ([]byte, error) {
	return httpapi.MergeOpenAPI(httpapi.WithProblem(paydOpenAPI),
		invoice.OpenAPI(), webhook.OpenAPI(), indexer.ReadAPIOpenAPI(), sweep.AdminOpenAPI())
}
