package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/evmpay/evmpay/store/problem"
)

// MergeOpenAPI joins OpenAPI 3.1 documents into one: base gives openapi,
// info, servers and top-level security; every part (each package's own
// document) adds its paths, components and tags. Two parts may describe the
// same path with different methods; the same operation twice, or two
// different components under one name, is an error (name them after their
// package). Identical components (a shared security scheme) merge.
func MergeOpenAPI(base []byte, parts ...[]byte) ([]byte, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(base, &doc); err != nil {
		return nil, fmt.Errorf("httpapi: openapi base: %w", err)
	}
	paths := map[string]map[string]json.RawMessage{}
	webhooks := map[string]json.RawMessage{}
	components := map[string]map[string]json.RawMessage{}
	var tags []json.RawMessage
	tagNames := map[string]json.RawMessage{}
	for i, part := range append([][]byte{base}, parts...) {
		var p struct {
			Paths      map[string]map[string]json.RawMessage `json:"paths"`
			Webhooks   map[string]json.RawMessage            `json:"webhooks"`
			Components map[string]map[string]json.RawMessage `json:"components"`
			Tags       []json.RawMessage                     `json:"tags"`
		}
		if err := json.Unmarshal(part, &p); err != nil {
			return nil, fmt.Errorf("httpapi: openapi part %d: %w", i, err)
		}
		for path, item := range p.Paths {
			if paths[path] == nil {
				paths[path] = map[string]json.RawMessage{}
			}
			for key, v := range item {
				if old, ok := paths[path][key]; ok && !sameJSON(old, v) {
					return nil, fmt.Errorf("httpapi: openapi part %d: %s %s is described twice", i, key, path)
				}
				paths[path][key] = v
			}
		}
		for name, v := range p.Webhooks {
			if old, ok := webhooks[name]; ok && !sameJSON(old, v) {
				return nil, fmt.Errorf("httpapi: openapi part %d: webhook %s is described twice", i, name)
			}
			webhooks[name] = v
		}
		for kind, named := range p.Components {
			if components[kind] == nil {
				components[kind] = map[string]json.RawMessage{}
			}
			for name, v := range named {
				if old, ok := components[kind][name]; ok && !sameJSON(old, v) {
					return nil, fmt.Errorf("httpapi: openapi part %d: components/%s/%s differs from another part's", i, kind, name)
				}
				components[kind][name] = v
			}
		}
		for _, t := range p.Tags {
			var tag struct {
				Name string `json:"name"`
			}
			if err := json.Unmarshal(t, &tag); err != nil {
				return nil, fmt.Errorf("httpapi: openapi part %d: tag: %w", i, err)
			}
			if _, seen := tagNames[tag.Name]; !seen {
				tagNames[tag.Name] = t
				tags = append(tags, t)
			}
		}
	}
	set := func(key string, v any) error {
		b, err := json.Marshal(v)
		doc[key] = b
		return err
	}
	if err := set("paths", paths); err != nil {
		return nil, err
	}
	if len(webhooks) > 0 {
		if err := set("webhooks", webhooks); err != nil {
			return nil, err
		}
	}
	if len(components) > 0 {
		if err := set("components", components); err != nil {
			return nil, err
		}
	}
	if len(tags) > 0 {
		slices.SortFunc(tags, func(a, b json.RawMessage) int { return bytes.Compare(a, b) })
		if err := set("tags", tags); err != nil {
			return nil, err
		}
	}
	return json.MarshalIndent(doc, "", "  ")
}

func sameJSON(a, b json.RawMessage) bool {
	var x, y bytes.Buffer
	if json.Compact(&x, a) != nil || json.Compact(&y, b) != nil {
		return false
	}
	return bytes.Equal(x.Bytes(), y.Bytes())
}

// WithProblem returns an OpenAPI document with its components.schemas.Problem
// set to the one problem schema every evmpay API answers with: RFC 9457
// members and the code enum of store/problem's table (problem.Codes). A
// package's document refers to "#/components/schemas/Problem" and gets the
// definition from here, so that every part (and the merged document) shares
// one error table. It panics on a document that is not JSON: the documents
// are embedded, and a test loads each.
func WithProblem(doc []byte) []byte {
	var d map[string]json.RawMessage
	if err := json.Unmarshal(doc, &d); err != nil {
		panic("httpapi: openapi document: " + err.Error())
	}
	var comps map[string]map[string]json.RawMessage
	if raw, ok := d["components"]; ok {
		if err := json.Unmarshal(raw, &comps); err != nil {
			panic("httpapi: openapi components: " + err.Error())
		}
	}
	if comps == nil {
		comps = map[string]map[string]json.RawMessage{}
	}
	if comps["schemas"] == nil {
		comps["schemas"] = map[string]json.RawMessage{}
	}
	comps["schemas"]["Problem"] = problemSchema
	b, _ := json.Marshal(comps)
	d["components"] = b
	out, _ := json.MarshalIndent(d, "", "  ")
	return out
}

// problemSchema is the Problem schema, built once from the table.
var problemSchema = func() json.RawMessage {
	schema := map[string]any{
		"type":        "object",
		"description": "RFC 9457 problem details, application/problem+json. `code` is stable: branch on it (one table for every evmpay API: store/problem). New codes may be added within /v1.",
		"required":    []string{"type", "title", "status", "code"},
		"properties": map[string]any{
			"type":   map[string]any{"type": "string", "description": "urn:evmpay:problem:<code>"},
			"title":  map[string]any{"type": "string"},
			"status": map[string]any{"type": "integer"},
			"detail": map[string]any{"type": "string", "description": "For people; never SQL, stack traces or secrets."},
			"code":   map[string]any{"type": "string", "enum": problem.Codes()},
			"field":  map[string]any{"type": "string", "description": "The request member or parameter at fault, when there is one."},
		},
	}
	b, err := json.Marshal(schema)
	if err != nil {
		panic(err)
	}
	return b
}()
