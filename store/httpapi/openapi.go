package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
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
