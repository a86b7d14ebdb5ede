package dashboard

import (
	"cmp"
	"context"
	"crypto/hkdf"
	"crypto/sha256"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/httpapi"
)

//go:embed templates assets messages
var files embed.FS

// Store is what the dashboard keeps besides what the Go API does: its
// users, sessions, second factors, links, audit log and payment links.
// *postgres.Store and *sqlite.Store satisfy it.
type Store interface {
	store.DashboardStore
}

// Deliveries serves the webhook deliveries API (webhook.DeliveriesAPI):
// the dashboard calls it in process, as its signed-in user's merchant.
type Deliveries interface {
	ServeHTTP(w http.ResponseWriter, r *http.Request)
}

// Config tunes a Dashboard.
type Config struct {
	// PublicURL is the dashboard's absolute URL as browsers reach it, the
	// mount prefix included ("https://pay.example.com/dashboard"). Its
	// path is the cookies' path and the prefix of every link; its host is
	// the passkeys' relying party and its origin the one they are bound
	// to. Required.
	PublicURL string
	// SecretKey seals TOTP secrets (an AES-256-GCM key derived with
	// HKDF-SHA256), at least 32 bytes: payd passes PAY_SECRET_KEY.
	// Required.
	SecretKey []byte
	// SessionIdle ends a session unused this long. Defaults to 30 minutes.
	SessionIdle time.Duration
	// SessionMax ends a session this long after sign-in whatever its use.
	// Defaults to 12 hours.
	SessionMax time.Duration
	// FreshSecondFactor is how recent a second factor must be for what
	// changes where money goes (the settlement address). Defaults to 5
	// minutes.
	FreshSecondFactor time.Duration
	// MaxFailedSignIns locks a user after this many failed passwords in a
	// row, for LockoutFor. Default to 5 and 15 minutes.
	MaxFailedSignIns int
	LockoutFor       time.Duration
	// SignInBurst and SignInEvery bound sign-in attempts per client
	// address: SignInBurst at once, one more every SignInEvery. Default
	// to 10 and 6 seconds.
	SignInBurst int
	SignInEvery time.Duration
	// TrustedProxies are the reverse proxies in front of the host: behind
	// them a client is its X-Forwarded-For address. Defaults to none.
	TrustedProxies []netip.Prefix
	// LinkTTL is how long invitation, reset and sign-in links last.
	// Defaults to 72 hours.
	LinkTTL time.Duration
	// Mailer sends invitations and reset links by mail (NewSMTPMailer).
	// Defaults to none: the page shows the link to hand over.
	Mailer Mailer
	// Deliveries is the webhook deliveries API; nil hides the webhooks
	// page's deliveries.
	Deliveries Deliveries
	// DefaultLanguage is used when the browser names none the catalogue
	// has. Defaults to "en".
	DefaultLanguage string
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
	// Logger receives what the dashboard does (never a secret). Defaults
	// to a logger that discards everything.
	Logger *slog.Logger
}

func (c *Config) fill() {
	c.SessionIdle = cmp.Or(c.SessionIdle, 30*time.Minute)
	c.SessionMax = cmp.Or(c.SessionMax, 12*time.Hour)
	c.FreshSecondFactor = cmp.Or(c.FreshSecondFactor, 5*time.Minute)
	c.MaxFailedSignIns = cmp.Or(c.MaxFailedSignIns, 5)
	c.LockoutFor = cmp.Or(c.LockoutFor, 15*time.Minute)
	c.SignInBurst = cmp.Or(c.SignInBurst, 10)
	c.SignInEvery = cmp.Or(c.SignInEvery, 6*time.Second)
	c.LinkTTL = cmp.Or(c.LinkTTL, 72*time.Hour)
	c.DefaultLanguage = cmp.Or(c.DefaultLanguage, "en")
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

func (c Config) validate() (*url.URL, error) {
	u, err := url.Parse(c.PublicURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, errors.New("dashboard: Config.PublicURL must be an absolute http(s) URL without query or fragment")
	}
	if len(c.SecretKey) < 32 {
		return nil, errors.New("dashboard: Config.SecretKey must be at least 32 bytes")
	}
	return u, nil
}

// Dashboard is the merchant dashboard: an http.Handler a host mounts at
// its PublicURL's path (payd: /dashboard on the API listener).
type Dashboard struct {
	api  *invoice.Service
	st   Store
	cfg  Config
	base *url.URL
	// prefix is the mount path without its trailing slash ("/dashboard").
	prefix string
	secure bool
	seal   *sealer
	i18n   *catalogue
	pages  map[string]*template.Template
	assets fs.FS
	csp    string
	limits *limiter
	ghosts *ghostFailures
	wa     *passkeys
	h      http.Handler
}

// New returns the dashboard of the merchants of api, keeping its own
// records in st.
func New(api *invoice.Service, st Store, cfg Config) (*Dashboard, error) {
	cfg.fill()
	base, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	if api == nil || st == nil {
		return nil, errors.New("dashboard: New needs the invoice service and a store")
	}
	d := &Dashboard{api: api, st: st, cfg: cfg, base: base, prefix: strings.TrimSuffix(base.Path, "/"),
		secure: base.Scheme == "https" || isLoopbackHost(base.Hostname()),
		limits: newLimiter(cfg.SignInBurst, cfg.SignInEvery), ghosts: newGhostFailures()}
	key, err := hkdf.Key(sha256.New, cfg.SecretKey, nil, "evmpay dashboard totp v1", 32)
	if err != nil {
		return nil, err
	}
	if d.seal, err = newSealer(key); err != nil {
		return nil, err
	}
	if d.i18n, err = loadCatalogue(cfg.DefaultLanguage); err != nil {
		return nil, err
	}
	if d.pages, err = parsePages(); err != nil {
		return nil, err
	}
	if d.assets, err = fs.Sub(files, "assets"); err != nil {
		return nil, err
	}
	if d.wa, err = newPasskeys(base); err != nil {
		return nil, err
	}
	d.csp = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; " +
		"frame-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
	mux := http.NewServeMux()
	d.routes(mux)
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(d.forbiddenCrossOrigin))
	d.h = cop.Handler(mux)
	return d, nil
}

// ServeHTTP serves the dashboard; r's path starts with the mount prefix.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", d.csp)
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	hd.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=(), payment=()")
	hd.Set("Cache-Control", "no-store")
	d.h.ServeHTTP(w, r)
}

// URL is the dashboard's public URL (Config.PublicURL, no trailing slash).
func (d *Dashboard) URL() string { return d.base.Scheme + "://" + d.base.Host + d.prefix }

// Prefix is the path the dashboard is mounted at ("/dashboard").
func (d *Dashboard) Prefix() string { return d.prefix }

// url is an absolute path inside the dashboard.
func (d *Dashboard) url(path string) string { return d.prefix + path }

// now is the dashboard's clock at microsecond precision (what both stores
// keep).
func (d *Dashboard) now() time.Time { return d.cfg.Now().UTC().Truncate(time.Microsecond) }

func (d *Dashboard) clientAddr(r *http.Request) netip.Addr {
	return httpapi.ClientAddr(r, d.cfg.TrustedProxies, 64)
}

func isLoopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// logError logs a failure the user sees only as "something went wrong".
func (d *Dashboard) logError(ctx context.Context, what string, err error) {
	d.cfg.Logger.ErrorContext(ctx, "dashboard: "+what, slog.String("error", err.Error()))
}

// errorf wraps for the logs.
func errorf(format string, a ...any) error { return fmt.Errorf("dashboard: "+format, a...) }
