package webhook_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/webhook"
)

// The OpenAPI document's EventType enum lists exactly the event types the
// service emits: every EventInvoice*, EventRefund*, EventPayout* and
// EventSettlement* constant of the store package.
func TestOpenAPI_EventTypeEnum_EveryTypeEmitted(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Enum []string `json:"enum"`
			} `json:"schemas"`
		} `json:"components"`
		Webhooks map[string]json.RawMessage `json:"webhooks"`
	}
	require.NoError(t, json.Unmarshal(webhook.OpenAPI(), &doc))
	require.Contains(t, doc.Webhooks, "invoiceEvent", "the webhook message itself is described")
	enum := doc.Components.Schemas["EventType"].Enum
	require.ElementsMatch(t, store.EventTypes(), enum)

	// Every constant the store declares, found in its source.
	files, err := filepath.Glob(filepath.Join("..", "store", "*.go"))
	require.NoError(t, err)
	var declared []string
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		require.NoError(t, err)
		for _, d := range file.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if !strings.HasPrefix(n.Name, "EventInvoice") && !strings.HasPrefix(n.Name, "EventRefund") &&
						!strings.HasPrefix(n.Name, "EventPayout") && !strings.HasPrefix(n.Name, "EventSettlement") || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					require.True(t, ok, "%s is a string literal", n.Name)
					v, err := strconv.Unquote(lit.Value)
					require.NoError(t, err)
					declared = append(declared, v)
				}
			}
		}
	}
	require.ElementsMatch(t, declared, store.EventTypes(), "store.EventTypes lists every EventInvoice, EventRefund and EventPayout constant")
}
