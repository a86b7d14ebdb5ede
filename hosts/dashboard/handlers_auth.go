package dashboard

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	qrcode "github.com/skip2/go-qrcode"

	"github.com/evmpay/evmpay/store"
)

func (d *Dashboard) handleSignInPage(w http.ResponseWriter, r *http.Request) {
	if sessionOf(r) != nil {
		d.redirect(w, r, "/", "")
		return
	}
	d.show(w, r, "signin", "sign_in", map[string]string{"Next": r.URL.Query().Get("next")})
}

func (d *Dashboard) handleSignIn(w http.ResponseWriter, r *http.Request) {
	email, pw, next := r.PostFormValue("email"), r.PostFormValue("password"), r.PostFormValue("next")
	u, reason, err := d.signIn(r.Context(), d.clientAddr(r), email, pw)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	if reason != "" {
		pd := d.data(r, "signin", "sign_in", map[string]string{"Next": next, "Email": email})
		pd.Error = pd.L.T("signin_" + reason)
		status := http.StatusUnauthorized
		if reason != "bad_credentials" {
			status = http.StatusTooManyRequests
			w.Header().Set("Retry-After", strconv.Itoa(int(d.cfg.LockoutFor/time.Second)))
		}
		d.render(w, r, status, pd)
		return
	}
	second, err := d.hasSecondFactor(r.Context(), u)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	if err := d.startSession(w, r, u, second, false); err != nil {
		d.fail(w, r, err)
		return
	}
	uid := u.ID
	d.audit(r.Context(), u.MerchantID, &uid, u.Email, "sign_in.password", "", "")
	if second {
		d.redirect(w, r, "/sign-in/second-factor"+nextQuery(d, next), "")
		return
	}
	d.redirectNext(w, r, next)
}

func nextQuery(d *Dashboard, next string) string {
	if d.localPath(next) {
		return "?next=" + url.QueryEscape(next)
	}
	return ""
}

func (d *Dashboard) redirectNext(w http.ResponseWriter, r *http.Request, next string) {
	if !d.localPath(next) {
		next = d.url("/")
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (d *Dashboard) handleSecondFactorPage(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r)
	ps, err := d.st.ListPasskeys(r.Context(), s.User.ID)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.show(w, r, "secondfactor", "second_factor", map[string]any{"TOTP": s.User.TOTPEnabledAt != nil,
		"Passkeys": len(ps) > 0, "Next": r.URL.Query().Get("next")})
}

// checkTOTP verifies a code of the user's, each time step once.
func (d *Dashboard) checkTOTP(ctx context.Context, u store.DashboardUser, code string) (bool, error) {
	if u.TOTPEnabledAt == nil || u.TOTPSecret == nil {
		return false, nil
	}
	key, err := d.seal.open(u.ID, u.TOTPSecret)
	if err != nil {
		return false, err
	}
	step := totpMatch(key, code, d.now())
	if step == 0 {
		return false, nil
	}
	return d.st.UseTOTPStep(ctx, u.ID, step)
}

func (d *Dashboard) handleSecondFactor(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r)
	now := d.now()
	if ok, _ := d.limits.allow(d.clientAddr(r), now); !ok {
		d.secondFactorError(w, r, "signin_rate_limited", http.StatusTooManyRequests)
		return
	}
	if s.User.LockedUntil != nil && now.Before(*s.User.LockedUntil) {
		d.secondFactorError(w, r, "signin_locked", http.StatusTooManyRequests)
		return
	}
	ok, err := d.checkTOTP(r.Context(), s.User, r.PostFormValue("code"))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	if !ok {
		u, err := d.st.RecordFailedSignIn(r.Context(), s.User.ID, d.cfg.MaxFailedSignIns, now.Add(d.cfg.LockoutFor), now)
		if err != nil {
			d.fail(w, r, err)
			return
		}
		d.auditAs(r.Context(), s, "second_factor.failed", "", "")
		if u.LockedUntil != nil && now.Before(*u.LockedUntil) {
			_, _ = d.st.RevokeDashboardSessions(r.Context(), u.ID, 0, now)
			d.secondFactorError(w, r, "signin_locked", http.StatusTooManyRequests)
			return
		}
		d.secondFactorError(w, r, "totp_wrong", http.StatusUnauthorized)
		return
	}
	if err := d.st.PassSecondFactor(r.Context(), s.ID, now); err != nil {
		d.fail(w, r, err)
		return
	}
	if s.User.FailedSignIns != 0 {
		u := s.User
		u.FailedSignIns, u.LockedUntil, u.UpdatedAt = 0, nil, now
		if err := d.st.UpdateDashboardUser(r.Context(), u); err != nil {
			d.fail(w, r, err)
			return
		}
	}
	d.auditAs(r.Context(), s, "second_factor.totp", "", "")
	d.redirectNext(w, r, r.PostFormValue("next"))
}

func (d *Dashboard) secondFactorError(w http.ResponseWriter, r *http.Request, key string, status int) {
	s := sessionOf(r)
	pd := d.data(r, "secondfactor", "second_factor", map[string]any{"TOTP": s.User.TOTPEnabledAt != nil, "Passkeys": true,
		"Next": r.PostFormValue("next")})
	pd.Error = pd.L.T(key)
	d.render(w, r, status, pd)
}

func (d *Dashboard) handleSignOut(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r)
	if err := d.st.RevokeDashboardSession(r.Context(), s.User.ID, s.ID, d.now()); err != nil {
		d.fail(w, r, err)
		return
	}
	d.auditAs(r.Context(), s, "sign_out", "", "")
	d.setCookie(w, "", -1)
	d.redirect(w, r, "/sign-in", "signed_out")
}

// One-time links: the token travels in the URL's fragment (never sent to
// a server, so never in an access log); the page's script puts it in the
// form the person submits.

func (d *Dashboard) handleLinkPage(w http.ResponseWriter, r *http.Request) {
	kind := r.URL.Query().Get("kind")
	if !slices.Contains([]string{store.LinkInvitation, store.LinkReset, store.LinkSignIn}, kind) {
		kind = store.LinkSignIn
	}
	d.show(w, r, "link", "link_"+kind, map[string]string{"Kind": kind})
}

func (d *Dashboard) handleLink(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	kind, tok := r.PostFormValue("kind"), r.PostFormValue("token")
	now := d.now()
	if ok, _ := d.limits.allow(d.clientAddr(r), now); !ok {
		d.linkError(w, r, kind, "signin_rate_limited", http.StatusTooManyRequests)
		return
	}
	var pw string
	if kind != store.LinkSignIn {
		pw = r.PostFormValue("password")
		if reason := checkPassword(pw); reason != "" {
			d.linkError(w, r, kind, reason, http.StatusBadRequest)
			return
		}
	}
	l, err := d.st.UseDashboardLink(ctx, kind, tokenHash(tok), now)
	if errors.Is(err, store.ErrNotFound) {
		d.linkError(w, r, kind, "link_invalid", http.StatusNotFound)
		return
	}
	if err != nil {
		d.fail(w, r, err)
		return
	}
	var u store.DashboardUser
	switch kind {
	case store.LinkInvitation:
		hash, err := hashPassword(pw)
		if err != nil {
			d.fail(w, r, err)
			return
		}
		wid := make([]byte, 32)
		_, _ = rand.Read(wid)
		u = store.DashboardUser{MerchantID: l.MerchantID, Email: l.Email, Name: strings.TrimSpace(r.PostFormValue("name")),
			Role: l.Role, PasswordHash: hash, WebAuthnID: wid, CreatedAt: now, UpdatedAt: now}
		if err := d.st.CreateDashboardUser(ctx, &u); err != nil {
			if errors.Is(err, store.ErrConflict) {
				d.linkError(w, r, kind, "email_taken", http.StatusConflict)
				return
			}
			d.fail(w, r, err)
			return
		}
		uid := u.ID
		d.audit(ctx, u.MerchantID, &uid, u.Email, "invitation.accept", "user "+strconv.FormatInt(u.ID, 10), "role "+u.Role)
	default:
		if l.UserID == nil {
			d.linkError(w, r, kind, "link_invalid", http.StatusNotFound)
			return
		}
		if u, err = d.st.GetDashboardUser(ctx, *l.UserID); err != nil {
			d.fail(w, r, err)
			return
		}
		if u.DisabledAt != nil {
			d.linkError(w, r, kind, "link_invalid", http.StatusNotFound)
			return
		}
		uid := u.ID
		if kind == store.LinkReset {
			if u.PasswordHash, err = hashPassword(pw); err != nil {
				d.fail(w, r, err)
				return
			}
			u.FailedSignIns, u.LockedUntil, u.UpdatedAt = 0, nil, now
			if err := d.st.UpdateDashboardUser(ctx, u); err != nil {
				d.fail(w, r, err)
				return
			}
			// A new password ends every session the old one opened.
			if _, err := d.st.RevokeDashboardSessions(ctx, u.ID, 0, now); err != nil {
				d.fail(w, r, err)
				return
			}
			d.audit(ctx, u.MerchantID, &uid, u.Email, "password.reset", "user "+strconv.FormatInt(u.ID, 10), "by link")
		} else {
			d.audit(ctx, u.MerchantID, &uid, u.Email, "sign_in.link", "user "+strconv.FormatInt(u.ID, 10), "")
		}
	}
	// A reset or invitation signs in with the password just set, which
	// counts as the first factor; a user with a second factor passes it.
	second, err := d.hasSecondFactor(ctx, u)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	if err := d.startSession(w, r, u, second, false); err != nil {
		d.fail(w, r, err)
		return
	}
	if second {
		d.redirect(w, r, "/sign-in/second-factor", "")
		return
	}
	d.redirect(w, r, "/", "welcome")
}

func (d *Dashboard) linkError(w http.ResponseWriter, r *http.Request, kind, key string, status int) {
	pd := d.data(r, "link", "link_"+kind, map[string]string{"Kind": kind})
	pd.Error = pd.L.T(key)
	d.render(w, r, status, pd)
}

// newLink makes a one-time link and returns its URL (the token in the
// fragment).
func (d *Dashboard) newLink(ctx context.Context, l store.DashboardLink) (string, error) {
	tok, hash, err := newToken()
	if err != nil {
		return "", err
	}
	l.TokenHash, l.CreatedAt, l.ExpiresAt = hash, d.now(), d.now().Add(d.cfg.LinkTTL)
	if err := d.st.CreateDashboardLink(ctx, &l); err != nil {
		return "", err
	}
	return d.base.Scheme + "://" + d.base.Host + d.url("/link") + "?kind=" + l.Kind + "#" + tok, nil
}

// SignInLink makes a one-time sign-in link for user userID (payd dev's
// banner; an operator's recovery), valid for Config.LinkTTL.
func (d *Dashboard) SignInLink(ctx context.Context, userID int64, createdBy string) (string, error) {
	u, err := d.st.GetDashboardUser(ctx, userID)
	if err != nil {
		return "", err
	}
	uid := u.ID
	return d.newLink(ctx, store.DashboardLink{Kind: store.LinkSignIn, MerchantID: u.MerchantID, UserID: &uid, CreatedBy: createdBy})
}

// ResetLink makes a one-time password reset link for user userID, for the
// operator to hand over (no mail server is assumed).
func (d *Dashboard) ResetLink(ctx context.Context, userID int64, createdBy string) (string, error) {
	u, err := d.st.GetDashboardUser(ctx, userID)
	if err != nil {
		return "", err
	}
	uid := u.ID
	link, err := d.newLink(ctx, store.DashboardLink{Kind: store.LinkReset, MerchantID: u.MerchantID, UserID: &uid, CreatedBy: createdBy})
	if err == nil {
		d.audit(ctx, u.MerchantID, nil, createdBy, "reset_link.create", "user "+strconv.FormatInt(u.ID, 10), "")
	}
	return link, err
}

// EnsureUser returns the merchant's user with this email, creating it
// with role and password the first time (payd dev's demo user; a host's
// first owner). An empty password leaves the user to a sign-in or reset
// link.
func (d *Dashboard) EnsureUser(ctx context.Context, merchantID int64, email, role, password string) (store.DashboardUser, error) {
	u, err := d.st.GetDashboardUserByEmail(ctx, email)
	if err == nil {
		if u.MerchantID != merchantID {
			return store.DashboardUser{}, errorf("%s is a user of another merchant", email)
		}
		return u, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return store.DashboardUser{}, err
	}
	if !slices.Contains(store.DashboardRoles(), role) {
		return store.DashboardUser{}, errorf("unknown role %q", role)
	}
	now := d.now()
	u = store.DashboardUser{MerchantID: merchantID, Email: email, Role: role, CreatedAt: now, UpdatedAt: now,
		WebAuthnID: make([]byte, 32)}
	_, _ = rand.Read(u.WebAuthnID)
	if password != "" {
		if reason := checkPassword(password); reason != "" {
			return store.DashboardUser{}, errorf("password: %s", reason)
		}
		if u.PasswordHash, err = hashPassword(password); err != nil {
			return store.DashboardUser{}, err
		}
	}
	if err := d.st.CreateDashboardUser(ctx, &u); err != nil {
		return store.DashboardUser{}, err
	}
	d.audit(ctx, merchantID, nil, "operator", "user.create", "user "+strconv.FormatInt(u.ID, 10), "role "+role)
	return u, nil
}

// Account: the user's own password, second factors and sessions.

type accountView struct {
	Passkeys  []store.Passkey
	Sessions  []store.DashboardSession
	TOTPSetup string // the otpauth URI while setting up
	TOTPQR    string // its QR code, a data: URL
	TOTPKey   string
}

func (d *Dashboard) accountView(r *http.Request) (*accountView, error) {
	s := sessionOf(r)
	ps, err := d.st.ListPasskeys(r.Context(), s.User.ID)
	if err != nil {
		return nil, err
	}
	ss, err := d.st.ListDashboardSessions(r.Context(), s.User.ID)
	if err != nil {
		return nil, err
	}
	return &accountView{Passkeys: ps, Sessions: ss}, nil
}

func (d *Dashboard) handleAccount(w http.ResponseWriter, r *http.Request) {
	v, err := d.accountView(r)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.show(w, r, "account", "account", v)
}

func (d *Dashboard) accountError(w http.ResponseWriter, r *http.Request, key string, status int) {
	v, err := d.accountView(r)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	pd := d.data(r, "account", "account", v)
	pd.Error = pd.L.T(key)
	d.render(w, r, status, pd)
}

func (d *Dashboard) handlePassword(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r)
	if !verifyPassword(r.PostFormValue("current"), s.User.PasswordHash) {
		d.accountError(w, r, "password_wrong", http.StatusUnauthorized)
		return
	}
	pw := r.PostFormValue("password")
	if reason := checkPassword(pw); reason != "" {
		d.accountError(w, r, reason, http.StatusBadRequest)
		return
	}
	hash, err := hashPassword(pw)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	u := s.User
	u.PasswordHash, u.UpdatedAt = hash, d.now()
	if err := d.st.UpdateDashboardUser(r.Context(), u); err != nil {
		d.fail(w, r, err)
		return
	}
	if _, err := d.st.RevokeDashboardSessions(r.Context(), u.ID, s.ID, d.now()); err != nil {
		d.fail(w, r, err)
		return
	}
	d.auditAs(r.Context(), s, "password.change", "user "+strconv.FormatInt(u.ID, 10), "other sessions revoked")
	d.redirect(w, r, "/account", "saved")
}

// handleTOTPBegin makes a new secret, stored sealed but not enabled until
// a first code confirms it.
func (d *Dashboard) handleTOTPBegin(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r)
	key, err := newTOTPKey()
	if err != nil {
		d.fail(w, r, err)
		return
	}
	sealed, err := d.seal.seal(s.User.ID, key)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	u := s.User
	if u.TOTPEnabledAt != nil {
		d.accountError(w, r, "totp_already", http.StatusConflict)
		return
	}
	u.TOTPSecret, u.UpdatedAt = sealed, d.now()
	if err := d.st.UpdateDashboardUser(r.Context(), u); err != nil {
		d.fail(w, r, err)
		return
	}
	v, err := d.accountView(r)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	v.TOTPSetup = totpURI(key, "evmpay", u.Email)
	v.TOTPKey = b32.EncodeToString(key)
	png, err := qrcode.Encode(v.TOTPSetup, qrcode.Medium, 256)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	v.TOTPQR = "data:image/png;base64," + base64.StdEncoding.EncodeToString(png)
	d.show(w, r, "account", "account", v)
}

func (d *Dashboard) handleTOTPConfirm(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r)
	u := s.User
	if u.TOTPSecret == nil || u.TOTPEnabledAt != nil {
		d.accountError(w, r, "totp_not_started", http.StatusConflict)
		return
	}
	key, err := d.seal.open(u.ID, u.TOTPSecret)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	step := totpMatch(key, r.PostFormValue("code"), d.now())
	if step == 0 {
		d.accountError(w, r, "totp_wrong", http.StatusBadRequest)
		return
	}
	if ok, err := d.st.UseTOTPStep(r.Context(), u.ID, step); err != nil || !ok {
		if err == nil {
			d.accountError(w, r, "totp_wrong", http.StatusBadRequest)
			return
		}
		d.fail(w, r, err)
		return
	}
	now := d.now()
	u, err = d.st.GetDashboardUser(r.Context(), u.ID)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	u.TOTPEnabledAt, u.UpdatedAt = &now, now
	if err := d.st.UpdateDashboardUser(r.Context(), u); err != nil {
		d.fail(w, r, err)
		return
	}
	if err := d.st.PassSecondFactor(r.Context(), s.ID, now); err != nil {
		d.fail(w, r, err)
		return
	}
	d.auditAs(r.Context(), s, "totp.enable", "user "+strconv.FormatInt(u.ID, 10), "")
	d.redirect(w, r, "/account", "totp_enabled")
}

func (d *Dashboard) handleTOTPDisable(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r)
	if !d.freshSecondFactor(s) {
		d.accountError(w, r, "needs_fresh_second_factor", http.StatusForbidden)
		return
	}
	u := s.User
	u.TOTPSecret, u.TOTPEnabledAt, u.UpdatedAt = nil, nil, d.now()
	if err := d.st.UpdateDashboardUser(r.Context(), u); err != nil {
		d.fail(w, r, err)
		return
	}
	d.auditAs(r.Context(), s, "totp.disable", "user "+strconv.FormatInt(u.ID, 10), "")
	d.redirect(w, r, "/account", "saved")
}

// handleReauthTOTP refreshes the session's second factor with a TOTP code
// (before an owner changes where money goes).
func (d *Dashboard) handleReauthTOTP(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r)
	next := r.PostFormValue("next")
	ok, err := d.checkTOTP(r.Context(), s.User, r.PostFormValue("code"))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	if !ok {
		d.auditAs(r.Context(), s, "second_factor.failed", "", "")
		d.accountError(w, r, "totp_wrong", http.StatusUnauthorized)
		return
	}
	if err := d.st.PassSecondFactor(r.Context(), s.ID, d.now()); err != nil {
		d.fail(w, r, err)
		return
	}
	d.auditAs(r.Context(), s, "second_factor.totp", "", "")
	if d.localPath(next) {
		http.Redirect(w, r, next+"?msg=second_factor_ok", http.StatusSeeOther)
		return
	}
	d.redirect(w, r, "/account", "second_factor_ok")
}

func (d *Dashboard) handleRevokeSession(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r)
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err := d.st.RevokeDashboardSession(r.Context(), s.User.ID, id, d.now()); err != nil && !errors.Is(err, store.ErrNotFound) {
		d.fail(w, r, err)
		return
	}
	d.auditAs(r.Context(), s, "session.revoke", "session "+strconv.FormatInt(id, 10), "")
	if id == s.ID {
		d.setCookie(w, "", -1)
		d.redirect(w, r, "/sign-in", "signed_out")
		return
	}
	d.redirect(w, r, "/account", "saved")
}

func (d *Dashboard) handleRevokeOthers(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r)
	n, err := d.st.RevokeDashboardSessions(r.Context(), s.User.ID, s.ID, d.now())
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.auditAs(r.Context(), s, "session.revoke_others", "", strconv.FormatInt(n, 10)+" sessions")
	d.redirect(w, r, "/account", "saved")
}
