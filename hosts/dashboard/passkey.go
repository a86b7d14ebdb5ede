package dashboard

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/webauthn"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/problem"
)

// Passkeys (WebAuthn, go-webauthn): a signed-in user registers passkeys
// (discoverable credentials, user verification preferred); a passkey
// signs in on its own (it is both factors), passes the second factor of
// a password sign-in, and refreshes the second factor before an owner
// changes where money goes. The ceremony's state (the challenge) travels
// in a short-lived sealed cookie, so any replica can finish it.

type passkeys struct {
	wa     *webauthn.WebAuthn
	origin string
}

// newPasskeys returns nil when the dashboard's host is an IP address:
// WebAuthn binds passkeys to a domain (browsers take "localhost", never
// "127.0.0.1"), so such a dashboard offers passwords and TOTP only.
func newPasskeys(base *url.URL) (*passkeys, error) {
	if net.ParseIP(base.Hostname()) != nil {
		return nil, nil
	}
	origin := base.Scheme + "://" + base.Host
	wa, err := webauthn.New(&webauthn.Config{RPID: base.Hostname(), RPDisplayName: "evmpay", RPOrigins: []string{origin}})
	if err != nil {
		return nil, errorf("passkeys: %w", err)
	}
	return &passkeys{wa: wa, origin: origin}, nil
}

// waUser is a dashboard user as go-webauthn sees it.
type waUser struct {
	u     store.DashboardUser
	creds []webauthn.Credential
}

func (w waUser) WebAuthnID() []byte                         { return w.u.WebAuthnID }
func (w waUser) WebAuthnName() string                       { return w.u.Email }
func (w waUser) WebAuthnDisplayName() string                { return w.u.Email }
func (w waUser) WebAuthnCredentials() []webauthn.Credential { return w.creds }

func (d *Dashboard) waUser(r *http.Request, u store.DashboardUser) (waUser, []store.Passkey, error) {
	ps, err := d.st.ListPasskeys(r.Context(), u.ID)
	if err != nil {
		return waUser{}, nil, err
	}
	out := waUser{u: u}
	for _, p := range ps {
		var c webauthn.Credential
		if err := json.Unmarshal(p.Credential, &c); err != nil {
			return waUser{}, nil, errorf("passkey %d: %w", p.ID, err)
		}
		out.creds = append(out.creds, c)
	}
	return out, ps, nil
}

const ceremonyCookie = "evmpay_dashboard_webauthn"

// ceremonyTTL is how long a passkey ceremony may take.
const ceremonyTTL = 5 * time.Minute

// ceremonyState is what the ceremony cookie holds, sealed: the kind, when
// it began (the dashboard's clock) and the library's session data.
type ceremonyState struct {
	Kind string                `json:"kind"`
	At   time.Time             `json:"at"`
	SD   *webauthn.SessionData `json:"sd"`
}

var ceremonyAAD = []byte("evmpay dashboard webauthn ceremony")

func (d *Dashboard) setCeremony(w http.ResponseWriter, kind string, sd *webauthn.SessionData) error {
	b, err := json.Marshal(ceremonyState{Kind: kind, At: d.now(), SD: sd})
	if err != nil {
		return err
	}
	sealed, err := d.seal.sealAAD(ceremonyAAD, b)
	if err != nil {
		return err
	}
	http.SetCookie(w, &http.Cookie{Name: ceremonyCookie, Value: base64.RawURLEncoding.EncodeToString(sealed),
		Path: d.prefix + "/", MaxAge: int(ceremonyTTL / time.Second), HttpOnly: true, Secure: d.secure, SameSite: http.SameSiteStrictMode})
	return nil
}

// ceremony reads (and clears) the ceremony cookie of kind: one finish per
// begin.
func (d *Dashboard) ceremony(w http.ResponseWriter, r *http.Request, kind string) (webauthn.SessionData, bool) {
	http.SetCookie(w, &http.Cookie{Name: ceremonyCookie, Value: "", Path: d.prefix + "/", MaxAge: -1, HttpOnly: true,
		Secure: d.secure, SameSite: http.SameSiteStrictMode})
	c, err := r.Cookie(ceremonyCookie)
	if err != nil {
		return webauthn.SessionData{}, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil {
		return webauthn.SessionData{}, false
	}
	b, err := d.seal.openAAD(ceremonyAAD, raw)
	if err != nil {
		return webauthn.SessionData{}, false
	}
	var v ceremonyState
	if json.Unmarshal(b, &v) != nil || v.Kind != kind || v.SD == nil || d.now().Sub(v.At) > ceremonyTTL || d.now().Before(v.At) {
		return webauthn.SessionData{}, false
	}
	return *v.SD, true
}

// handlePasskeyRegisterBegin: a signed-in user (with a full session)
// starts registering a passkey.
func (d *Dashboard) handlePasskeyRegisterBegin(w http.ResponseWriter, r *http.Request) {
	if d.wa == nil {
		problem.Write(w, problem.Of(problem.CodeNotFound, "passkeys need the dashboard on a domain name (localhost included), not an IP address"))
		return
	}
	s := sessionOf(r)
	wu, _, err := d.waUser(r, s.User)
	if err != nil {
		d.problem(w, r, err)
		return
	}
	var exclude []protocol.CredentialDescriptor
	for _, c := range wu.creds {
		exclude = append(exclude, c.Descriptor())
	}
	opts, sd, err := d.wa.wa.BeginRegistration(wu, webauthn.WithResidentKeyRequirement(protocol.ResidentKeyRequirementRequired),
		webauthn.WithExclusions(exclude))
	if err != nil {
		d.problem(w, r, err)
		return
	}
	if err := d.setCeremony(w, "register", sd); err != nil {
		d.problem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, opts)
}

func (d *Dashboard) handlePasskeyRegisterFinish(w http.ResponseWriter, r *http.Request) {
	if d.wa == nil {
		problem.Write(w, problem.Of(problem.CodeNotFound, "passkeys need the dashboard on a domain name (localhost included), not an IP address"))
		return
	}
	s := sessionOf(r)
	sd, ok := d.ceremony(w, r, "register")
	if !ok {
		problem.Write(w, problem.Of(problem.CodeInvalidRequest, "the passkey ceremony expired or was not started here; start again"))
		return
	}
	wu, _, err := d.waUser(r, s.User)
	if err != nil {
		d.problem(w, r, err)
		return
	}
	name := strings.TrimSpace(r.URL.Query().Get("name"))
	if name == "" || len(name) > 100 {
		name = "Passkey"
	}
	cred, err := d.wa.wa.FinishRegistration(wu, sd, r)
	if err != nil {
		d.cfg.Logger.InfoContext(r.Context(), "dashboard: passkey registration refused", "error", err.Error())
		problem.Write(w, problem.Of(problem.CodeInvalidRequest, "the passkey could not be verified"))
		return
	}
	b, err := json.Marshal(cred)
	if err != nil {
		d.problem(w, r, err)
		return
	}
	now := d.now()
	p := store.Passkey{UserID: s.User.ID, CredentialID: cred.ID, Name: name, Credential: b, CreatedAt: now}
	if err := d.st.CreatePasskey(r.Context(), &p); err != nil {
		d.problem(w, r, err)
		return
	}
	// Registering a passkey is a second factor just passed.
	if err := d.st.PassSecondFactor(r.Context(), s.ID, now); err != nil {
		d.problem(w, r, err)
		return
	}
	d.auditAs(r.Context(), s, "passkey.add", "passkey "+strconv.FormatInt(p.ID, 10), name)
	writeJSON(w, http.StatusOK, map[string]any{"id": p.ID, "name": p.Name})
}

// handlePasskeyAssertBegin starts a passkey sign-in (no session), a
// password sign-in's second factor (a pending session) or a fresh second
// factor (a signed-in session): any discoverable passkey may answer; the
// finish checks whose it is.
func (d *Dashboard) handlePasskeyAssertBegin(w http.ResponseWriter, r *http.Request) {
	if d.wa == nil {
		problem.Write(w, problem.Of(problem.CodeNotFound, "passkeys need the dashboard on a domain name (localhost included), not an IP address"))
		return
	}
	if ok, wait := d.limits.allow(d.clientAddr(r), d.now()); !ok {
		w.Header().Set("Retry-After", strconv.Itoa(int(wait/time.Second)+1))
		problem.Write(w, problem.Of(problem.CodeRateLimited, "too many sign-in attempts from this address; retry later"))
		return
	}
	opts, sd, err := d.wa.wa.BeginDiscoverableLogin(webauthn.WithUserVerification(protocol.VerificationPreferred))
	if err != nil {
		d.problem(w, r, err)
		return
	}
	if err := d.setCeremony(w, "assert", sd); err != nil {
		d.problem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, opts)
}

func (d *Dashboard) handlePasskeyAssertFinish(w http.ResponseWriter, r *http.Request) {
	if d.wa == nil {
		problem.Write(w, problem.Of(problem.CodeNotFound, "passkeys need the dashboard on a domain name (localhost included), not an IP address"))
		return
	}
	ctx := r.Context()
	sd, ok := d.ceremony(w, r, "assert")
	if !ok {
		problem.Write(w, problem.Of(problem.CodeInvalidRequest, "the passkey ceremony expired or was not started here; start again"))
		return
	}
	var found store.DashboardUser
	var foundKey store.Passkey
	handler := func(rawID, userHandle []byte) (webauthn.User, error) {
		p, err := d.st.GetPasskeyByCredentialID(ctx, rawID)
		if err != nil {
			return nil, err
		}
		u, err := d.st.GetDashboardUser(ctx, p.UserID)
		if err != nil {
			return nil, err
		}
		if !bytes.Equal(u.WebAuthnID, userHandle) || u.DisabledAt != nil {
			return nil, errors.New("passkey of another user, or of a disabled one")
		}
		wu, _, err := d.waUser(r, u)
		if err != nil {
			return nil, err
		}
		found, foundKey = u, p
		return wu, nil
	}
	_, cred, err := d.wa.wa.FinishPasskeyLogin(handler, sd, r)
	if err != nil || cred.Authenticator.CloneWarning {
		if err == nil {
			err = errors.New("sign count went backwards: a cloned authenticator?")
		}
		d.cfg.Logger.InfoContext(ctx, "dashboard: passkey sign-in refused", "error", err.Error())
		problem.Write(w, problem.Of(problem.CodeUnauthorized, "this passkey could not be verified"))
		return
	}
	now := d.now()
	b, err := json.Marshal(cred)
	if err == nil {
		err = d.st.UpdatePasskeyUse(ctx, foundKey.ID, b, now)
	}
	if err != nil {
		d.problem(w, r, err)
		return
	}
	cur, err := d.loadSession(r)
	if err != nil {
		d.problem(w, r, err)
		return
	}
	next := d.url("/")
	if cur != nil {
		if cur.UserID != found.ID {
			problem.Write(w, problem.Of(problem.CodeUnauthorized, "this passkey belongs to another user"))
			return
		}
		if err := d.st.PassSecondFactor(ctx, cur.ID, now); err != nil {
			d.problem(w, r, err)
			return
		}
		uid := found.ID
		d.audit(ctx, found.MerchantID, &uid, found.Email, "second_factor.passkey", "passkey "+strconv.FormatInt(foundKey.ID, 10), "")
		if back := r.URL.Query().Get("next"); d.localPath(back) {
			next = back
		}
	} else {
		if err := d.startSession(w, r, found, false, true); err != nil {
			d.problem(w, r, err)
			return
		}
		uid := found.ID
		d.audit(ctx, found.MerchantID, &uid, found.Email, "sign_in.passkey", "passkey "+strconv.FormatInt(foundKey.ID, 10), "")
	}
	writeJSON(w, http.StatusOK, map[string]string{"next": next})
}

func (d *Dashboard) handlePasskeyDelete(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r)
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err := d.st.DeletePasskey(r.Context(), s.User.ID, id); err != nil && !errors.Is(err, store.ErrNotFound) {
		d.fail(w, r, err)
		return
	}
	d.auditAs(r.Context(), s, "passkey.remove", "passkey "+strconv.FormatInt(id, 10), "")
	d.redirect(w, r, "/account", "saved")
}
