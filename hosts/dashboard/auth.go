package dashboard

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/argon2"
	"golang.org/x/time/rate"

	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/store"
)

// Passwords: Argon2id with the API keys' parameters (OWASP's minimum:
// m = 19 MiB, t = 2, p = 1), stored as PHC strings.
const (
	argonTime    = 2
	argonMemory  = 19 * 1024
	argonThreads = 1
	argonKeyLen  = 32
	// MinPasswordLen is the shortest password accepted (NIST SP 800-63B).
	MinPasswordLen = 12
	maxPasswordLen = 256
)

// hashPassword returns the Argon2id hash of pw in PHC string format.
func hashPassword(pw string) (string, error) {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	sum := argon2.IDKey([]byte(pw), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime, argonThreads,
		base64.RawStdEncoding.EncodeToString(salt), base64.RawStdEncoding.EncodeToString(sum)), nil
}

// dummyHash is verified against when the email is unknown, so that an
// unknown email takes as long as a wrong password.
var dummyHash, _ = hashPassword("not a password of anyone's")

// verifyPassword reports whether pw matches the PHC-format Argon2id hash;
// parameters come from the hash, bounded.
func verifyPassword(pw, phc string) bool {
	parts := strings.Split(phc, "$")
	if len(parts) != 6 || parts[1] != "argon2id" || parts[2] != "v="+strconv.Itoa(argon2.Version) {
		return false
	}
	var m, t uint32
	var p uint8
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &m, &t, &p); err != nil || m > 256*1024 || t > 10 || p > 8 || p == 0 {
		return false
	}
	salt, err1 := base64.RawStdEncoding.DecodeString(parts[4])
	want, err2 := base64.RawStdEncoding.DecodeString(parts[5])
	if err1 != nil || err2 != nil || len(want) < 16 || len(want) > 64 {
		return false
	}
	got := argon2.IDKey([]byte(pw), salt, t, m, p, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1
}

// checkPassword is the rule for a new password: its reason, or "".
func checkPassword(pw string) string {
	switch {
	case len([]rune(pw)) < MinPasswordLen:
		return "password_short"
	case len(pw) > maxPasswordLen:
		return "password_long"
	}
	return ""
}

// sealer seals TOTP secrets with AES-256-GCM, bound to the user id.
type sealer struct{ aead cipher.AEAD }

func newSealer(key []byte) (*sealer, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	g, err := cipher.NewGCM(b)
	if err != nil {
		return nil, err
	}
	return &sealer{aead: g}, nil
}

func userAAD(userID int64) []byte {
	return []byte("evmpay dashboard user " + strconv.FormatInt(userID, 10))
}

func (s *sealer) seal(userID int64, plain []byte) ([]byte, error) {
	return s.sealAAD(userAAD(userID), plain)
}

func (s *sealer) open(userID int64, sealed []byte) ([]byte, error) {
	return s.openAAD(userAAD(userID), sealed)
}

// sealAAD returns version ‖ nonce ‖ AES-256-GCM(plain, aad).
func (s *sealer) sealAAD(aad, plain []byte) ([]byte, error) {
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	out := append([]byte{1}, nonce...)
	return s.aead.Seal(out, nonce, plain, aad), nil
}

func (s *sealer) openAAD(aad, sealed []byte) ([]byte, error) {
	n := s.aead.NonceSize()
	if len(sealed) < 1+n || sealed[0] != 1 {
		return nil, errors.New("dashboard: sealed secret is malformed")
	}
	return s.aead.Open(nil, sealed[1:1+n], sealed[1+n:], aad)
}

// newToken returns 256 random bits, base64url, and their SHA-256: a
// session cookie, or a one-time link's token.
func newToken() (string, []byte, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", nil, err
	}
	tok := base64.RawURLEncoding.EncodeToString(b)
	h := sha256.Sum256([]byte(tok))
	return tok, h[:], nil
}

func tokenHash(tok string) []byte {
	h := sha256.Sum256([]byte(tok))
	return h[:]
}

// limiter bounds sign-in attempts per client address (a token bucket each,
// forgotten when full again).
type limiter struct {
	mu      sync.Mutex
	burst   int
	every   time.Duration
	buckets map[netip.Addr]*rate.Limiter
	swept   time.Time
}

func newLimiter(burst int, every time.Duration) *limiter {
	return &limiter{burst: burst, every: every, buckets: map[netip.Addr]*rate.Limiter{}}
}

// allow takes one attempt for addr at now; false and how long to wait
// when there is none left.
func (l *limiter) allow(addr netip.Addr, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.swept) > time.Minute {
		for a, b := range l.buckets {
			if b.TokensAt(now) >= float64(l.burst) {
				delete(l.buckets, a)
			}
		}
		l.swept = now
	}
	b, ok := l.buckets[addr]
	if !ok {
		b = rate.NewLimiter(rate.Every(l.every), l.burst)
		l.buckets[addr] = b
	}
	r := b.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// ghostFailures counts failed sign-ins for emails that have no user, so
// that they lock like real ones: lockout tells nobody whether an email
// has an account.
type ghostFailures struct {
	mu sync.Mutex
	m  map[string]ghost
}

type ghost struct {
	n     int
	until time.Time
	last  time.Time
}

func newGhostFailures() *ghostFailures { return &ghostFailures{m: map[string]ghost{}} }

func (g *ghostFailures) locked(email string, now time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return now.Before(g.m[email].until)
}

func (g *ghostFailures) fail(email string, now time.Time, max int, lock time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.m) > 100_000 {
		for k, v := range g.m {
			if now.Sub(v.last) > lock {
				delete(g.m, k)
			}
		}
	}
	e := g.m[email]
	e.n++
	e.last = now
	if e.n >= max {
		e.until, e.n = now.Add(lock), 0
	}
	g.m[email] = e
}

// Sessions.

const sessionCookie = "evmpay_dashboard"

// session is the signed-in request's user and session.
type session struct {
	store.DashboardSession
	User store.DashboardUser
	// Principal is the user acting through the Go API: the merchant and
	// the user's role's scopes.
	Principal invoice.Principal
}

type sessionKey struct{}

func sessionOf(r *http.Request) *session {
	s, _ := r.Context().Value(sessionKey{}).(*session)
	return s
}

// startSession makes a new session for u (rotated at every sign-in: the
// browser's old session, if any, is revoked) and sets its cookie.
func (d *Dashboard) startSession(w http.ResponseWriter, r *http.Request, u store.DashboardUser, pending, secondFactor bool) error {
	now := d.now()
	if old, err := r.Cookie(sessionCookie); err == nil {
		if s, err := d.st.GetDashboardSessionByHash(r.Context(), tokenHash(old.Value)); err == nil && s.RevokedAt == nil {
			_ = d.st.RevokeDashboardSession(r.Context(), s.UserID, s.ID, now)
		}
	}
	tok, hash, err := newToken()
	if err != nil {
		return err
	}
	s := store.DashboardSession{TokenHash: hash, UserID: u.ID, MerchantID: u.MerchantID, CreatedAt: now, LastSeenAt: now,
		ExpiresAt: now.Add(d.cfg.SessionIdle), Pending: pending, UserAgent: truncate(r.UserAgent(), 200)}
	if secondFactor {
		s.SecondFactorAt = &now
	}
	if err := d.st.CreateDashboardSession(r.Context(), &s); err != nil {
		return err
	}
	d.setCookie(w, tok, int(d.cfg.SessionMax/time.Second))
	return nil
}

func (d *Dashboard) setCookie(w http.ResponseWriter, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: value, Path: d.prefix + "/", MaxAge: maxAge,
		HttpOnly: true, Secure: d.secure, SameSite: http.SameSiteLaxMode})
}

// loadSession reads the request's session: nil when there is none, it is
// revoked, expired, or its user or merchant disabled.
func (d *Dashboard) loadSession(r *http.Request) (*session, error) {
	c, err := r.Cookie(sessionCookie)
	if err != nil || len(c.Value) != 43 {
		return nil, nil
	}
	ctx := r.Context()
	s, err := d.st.GetDashboardSessionByHash(ctx, tokenHash(c.Value))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	now := d.now()
	if s.RevokedAt != nil || !now.Before(s.ExpiresAt) || now.Sub(s.CreatedAt) >= d.cfg.SessionMax {
		return nil, nil
	}
	u, err := d.st.GetDashboardUser(ctx, s.UserID)
	if err != nil {
		return nil, err
	}
	if u.DisabledAt != nil {
		return nil, nil
	}
	owner, err := d.api.Owner(ctx, u.MerchantID)
	if errors.Is(err, invoice.ErrUnauthorized) {
		return nil, nil // the merchant is disabled
	}
	if err != nil {
		return nil, err
	}
	// The idle timeout slides, written at most once a minute.
	if now.Sub(s.LastSeenAt) > time.Minute {
		exp := now.Add(d.cfg.SessionIdle)
		if err := d.st.TouchDashboardSession(ctx, s.ID, now, exp); err != nil {
			return nil, err
		}
		s.LastSeenAt, s.ExpiresAt = now, exp
	}
	return &session{DashboardSession: s, User: u,
		Principal: invoice.Principal{Merchant: owner.Merchant, UserID: u.ID, Scopes: roleScopes(u.Role)}}, nil
}

// freshSecondFactor reports whether the session passed a second factor
// within Config.FreshSecondFactor.
func (d *Dashboard) freshSecondFactor(s *session) bool {
	return s.SecondFactorAt != nil && d.now().Sub(*s.SecondFactorAt) < d.cfg.FreshSecondFactor
}

// hasSecondFactor reports whether u has TOTP or a passkey.
func (d *Dashboard) hasSecondFactor(ctx context.Context, u store.DashboardUser) (bool, error) {
	if u.TOTPEnabledAt != nil {
		return true, nil
	}
	ps, err := d.st.ListPasskeys(ctx, u.ID)
	return len(ps) > 0, err
}

// signIn checks an email and password: the user, or a reason for the
// page ("bad_credentials", "locked", "rate_limited").
func (d *Dashboard) signIn(ctx context.Context, addr netip.Addr, email, pw string) (store.DashboardUser, string, error) {
	now := d.now()
	if ok, _ := d.limits.allow(addr, now); !ok {
		return store.DashboardUser{}, "rate_limited", nil
	}
	email = strings.ToLower(strings.TrimSpace(email))
	u, err := d.st.GetDashboardUserByEmail(ctx, email)
	if errors.Is(err, store.ErrNotFound) || (err == nil && (u.DisabledAt != nil || u.PasswordHash == "")) {
		verifyPassword(pw, dummyHash)
		if d.ghosts.locked(email, now) {
			return store.DashboardUser{}, "locked", nil
		}
		d.ghosts.fail(email, now, d.cfg.MaxFailedSignIns, d.cfg.LockoutFor)
		return store.DashboardUser{}, "bad_credentials", nil
	}
	if err != nil {
		return store.DashboardUser{}, "", err
	}
	if u.LockedUntil != nil && now.Before(*u.LockedUntil) {
		return store.DashboardUser{}, "locked", nil
	}
	if !verifyPassword(pw, u.PasswordHash) {
		u, err = d.st.RecordFailedSignIn(ctx, u.ID, d.cfg.MaxFailedSignIns, now.Add(d.cfg.LockoutFor), now)
		if err != nil {
			return store.DashboardUser{}, "", err
		}
		uid := u.ID
		d.audit(ctx, u.MerchantID, &uid, u.Email, "sign_in.failed", "", "")
		if u.LockedUntil != nil && now.Before(*u.LockedUntil) {
			d.audit(ctx, u.MerchantID, &uid, u.Email, "user.locked", "user "+strconv.FormatInt(u.ID, 10),
				"after "+strconv.Itoa(d.cfg.MaxFailedSignIns)+" failed sign-ins")
			return store.DashboardUser{}, "locked", nil
		}
		return store.DashboardUser{}, "bad_credentials", nil
	}
	if u.FailedSignIns != 0 || u.LockedUntil != nil {
		u.FailedSignIns, u.LockedUntil, u.UpdatedAt = 0, nil, now
		if err := d.st.UpdateDashboardUser(ctx, u); err != nil {
			return store.DashboardUser{}, "", err
		}
	}
	return u, "", nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
