package checkout

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

// The claim page: where a payer names the address a refund goes to
// (invoice's refunds made without a destination answer claim_url,
// "<base>/claim#<claim token>"). It is the checkout page's sibling: the
// same style, languages, security headers and rules (the token in the
// fragment, nothing third-party); its script reads GET /v1/public/refund
// and sends POST /v1/public/refund/destination with the token as bearer.
// Its messages are claim/<lang>.json over the checkout's messages/<lang>.json
// (the shared words — network, copy, wallet errors — come from there).

// loadClaim parses the claim page and builds its catalogue: each language
// of the checkout's, with the claim messages of that language over it,
// completed with the default language's claim messages.
func (h *Handler) loadClaim() error {
	page, err := template.ParseFS(files, "claim.html")
	if err != nil {
		return fmt.Errorf("checkout: claim.html: %w", err)
	}
	names, err := fs.Glob(files, "claim/*.json")
	if err != nil {
		return err
	}
	claim := map[string]map[string]string{}
	for _, n := range names {
		b, err := files.ReadFile(n)
		if err != nil {
			return err
		}
		var m map[string]string
		if err := json.Unmarshal(b, &m); err != nil {
			return fmt.Errorf("checkout: %s: %w", n, err)
		}
		claim[strings.ToLower(strings.TrimSuffix(path.Base(n), ".json"))] = m
	}
	def := claim[h.order[0]]
	if def == nil {
		return fmt.Errorf("checkout: no claim/%s.json for the default language", h.order[0])
	}
	h.claimLangs = map[string]map[string]string{}
	for lang, base := range h.langs {
		m := make(map[string]string, len(base)+len(def))
		for k, v := range base {
			m[k] = v
		}
		for k, v := range def {
			m[k] = v
		}
		for k, v := range claim[lang] {
			m[k] = v
		}
		h.claimLangs[lang] = m
	}
	h.claimPage = page
	return nil
}

func (h *Handler) serveClaim(w http.ResponseWriter, r *http.Request) {
	h.render(w, r, h.claimPage, h.claimLangs)
}
