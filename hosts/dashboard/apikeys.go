package dashboard

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/evmpay/evmpay/store"
)

// API keys: the owner makes scoped keys (the secret shown once) and
// revokes them, through the Go API.

func (d *Dashboard) handleAPIKeys(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r)
	ks, err := d.api.APIKeys(r.Context(), s.Principal.Merchant.ID)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.show(w, r, "apikeys", "api_keys", map[string]any{"Keys": ks, "Scopes": store.AllScopes()})
}

func (d *Dashboard) handleCreateAPIKey(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r)
	if err := r.ParseForm(); err != nil {
		d.fail(w, r, err)
		return
	}
	k, err := d.api.CreateAPIKey(r.Context(), s.Principal, strings.TrimSpace(r.PostFormValue("name")), r.PostForm["scope"])
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.auditAs(r.Context(), s, "api_key.create", "api key "+strconv.FormatInt(k.ID, 10), k.Name+": "+strings.Join(k.Scopes, ","))
	d.show(w, r, "apikeymade", "api_key_made", k)
}

func (d *Dashboard) handleRevokeAPIKey(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r)
	k, err := d.api.RevokeAPIKey(r.Context(), s.Principal, pathID(r))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.auditAs(r.Context(), s, "api_key.revoke", "api key "+strconv.FormatInt(k.ID, 10), k.Name)
	d.redirect(w, r, "/api-keys", "saved")
}
