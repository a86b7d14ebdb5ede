package checkout

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/text/language"

	"github.com/evmpay/evmpay/store/httpapi"
	"github.com/evmpay/evmpay/store/problem"
)

//go:embed page.html assets messages claim.html claim
var files embed.FS

// Config tunes a Handler.
type Config struct {
	// ChainName names the chain on the page and in the wallet's "add
	// network" request. Defaults to "" (the page says "chain <id>").
	ChainName string
	// NativeSymbol and NativeDecimals describe the chain's native coin.
	// Default to "ETH" and 18.
	NativeSymbol   string
	NativeDecimals int
	// RPCURL is the public JSON-RPC URL (payd's RPC proxy) offered to a
	// browser wallet that does not know the chain (wallet_addEthereumChain).
	// Defaults to "": such a wallet is then asked to add the chain itself.
	RPCURL string
	// FrameAncestors lists the origins allowed to embed the page in a frame
	// (the CSP frame-ancestors directive), e.g. "https://shop.example".
	// Defaults to none: the page cannot be framed.
	FrameAncestors []string
	// LateWindow is how long after expiry a full payment is still credited
	// (settlement.Config.LateWindow); the expired state says so. Defaults
	// to 24 hours.
	LateWindow time.Duration
	// PollInterval is how often the page reads the invoice. Defaults to 1
	// second (a change shows within 2 s).
	PollInterval time.Duration
	// DefaultLanguage is the language used when the request names none the
	// catalogue has. Defaults to "en".
	DefaultLanguage string
	// ExplorerTxURL is the chain's block explorer page of a transaction,
	// with "{tx}" where the hash goes, e.g.
	// "https://explorer.example/tx/{tx}": from "payment seen" on, the page
	// links every payment's hash to it. Defaults to "" (hashes without
	// links; the dev chain has no explorer).
	ExplorerTxURL string
	// ExplorerAddressURL is the explorer page of an address, with
	// "{address}" where it goes, e.g.
	// "https://explorer.example/address/{address}": the token contract
	// links to it. Defaults to "" (no link).
	ExplorerAddressURL string
	// Networks describes each chain the deployment serves (an invoice's
	// chain_id, a quote's or a payment's): its name, native coin, public
	// RPC URL and explorer, used by the page for whichever chain is being
	// paid. ChainID must be non-zero and unique. ChainName, NativeSymbol,
	// NativeDecimals, RPCURL, ExplorerTxURL and ExplorerAddressURL above
	// describe every chain not listed. Defaults to none: every chain is
	// described by those fields.
	Networks []Network
	// RedirectAfter is how long the page shows the payer's final state
	// (payment confirmed) before it sends the payer to the invoice's
	// redirect_url; the page says so and offers to stay. Defaults to 10
	// seconds; negative: never automatically (the "Return to merchant"
	// button only).
	RedirectAfter time.Duration
	// Logger receives template failures. Defaults to a logger that discards
	// everything.
	Logger *slog.Logger
}

// Network is the page's view of one chain: what it shows of the chain and
// what it tells a browser wallet that does not know it (EIP-3085
// wallet_addEthereumChain). Its native coin has 18 decimals, as every EVM
// chain's does over JSON-RPC (docs/chains.md, "The native coin").
type Network struct {
	// ChainID is the chain's EIP-155 id. Required: non-zero, and listed
	// once.
	ChainID uint64
	// Name names the chain on the page, in the network picker and in the
	// wallet's "add network" request (chainName). Defaults to "" (the page
	// says "Chain id <id>", the wallet is offered "Chain <id>").
	Name string
	// NativeSymbol is the symbol of the chain's native coin (the local evmd
	// chain's is "TEST"): 2 to 6 ASCII letters or digits, as EIP-3085
	// wallets require. Defaults to "ETH".
	NativeSymbol string
	// RPCURL is the chain's public JSON-RPC URL offered to a wallet that
	// does not know the chain, an absolute http(s) URL. Defaults to "" (the
	// wallet is asked to add the chain without one). Not inherited from
	// Config.RPCURL: that one serves another chain.
	RPCURL string
	// ExplorerTxURL and ExplorerAddressURL are the chain's block explorer
	// pages of a transaction ("{tx}") and of an address ("{address}"),
	// absolute http(s) URLs with the placeholder once, as
	// Config.ExplorerTxURL and Config.ExplorerAddressURL. Default to ""
	// (no links); not inherited either.
	ExplorerTxURL, ExplorerAddressURL string
}

// symbolOK is what EIP-3085 allows as nativeCurrency.symbol: 2 to 6
// characters, here ASCII letters or digits.
func symbolOK(s string) bool {
	if len(s) < 2 || len(s) > 6 {
		return false
	}
	for _, c := range s {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// validateNetworks checks every Network, naming the bad one and its
// setting.
func validateNetworks(ns []Network) error {
	seen := map[uint64]bool{}
	for i, n := range ns {
		where := fmt.Sprintf("checkout: Networks[%d] (chain %d)", i, n.ChainID)
		switch {
		case n.ChainID == 0:
			return fmt.Errorf("checkout: Networks[%d] (%q): ChainID is required", i, n.Name)
		case seen[n.ChainID]:
			return fmt.Errorf("%s: ChainID listed twice", where)
		case !symbolOK(n.NativeSymbol):
			return fmt.Errorf("%s: NativeSymbol %q must be 2 to 6 ASCII letters or digits (EIP-3085 wallets refuse others)", where, n.NativeSymbol)
		case strings.ContainsFunc(n.Name, func(r rune) bool { return r < ' ' || r == 0x7f }) || len(n.Name) > 64:
			return fmt.Errorf("%s: Name must be at most 64 bytes without control characters", where)
		}
		seen[n.ChainID] = true
		if n.RPCURL != "" {
			if u, err := url.Parse(n.RPCURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return fmt.Errorf("%s: RPCURL must be an absolute http(s) URL", where)
			}
		}
		if err := checkTemplate(where+": ExplorerTxURL", n.ExplorerTxURL, "{tx}"); err != nil {
			return err
		}
		if err := checkTemplate(where+": ExplorerAddressURL", n.ExplorerAddressURL, "{address}"); err != nil {
			return err
		}
	}
	return nil
}

func (c *Config) fill() {
	c.Networks = slices.Clone(c.Networks)
	for i := range c.Networks {
		c.Networks[i].NativeSymbol = cmp.Or(c.Networks[i].NativeSymbol, "ETH")
	}
	c.NativeSymbol = cmp.Or(c.NativeSymbol, "ETH")
	c.NativeDecimals = cmp.Or(c.NativeDecimals, 18)
	c.LateWindow = cmp.Or(c.LateWindow, 24*time.Hour)
	c.PollInterval = cmp.Or(c.PollInterval, time.Second)
	c.DefaultLanguage = cmp.Or(c.DefaultLanguage, "en")
	c.RedirectAfter = cmp.Or(c.RedirectAfter, 10*time.Second)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Handler serves the hosted checkout page: GET /checkout (the page, in the
// payer's language) and GET /checkout/assets/… (its script and style). The
// lookup token travels in the URL fragment and never reaches it.
type Handler struct {
	cfg   Config
	csp   string
	page  *template.Template
	langs map[string]map[string]string // language → complete catalogue
	// order is the catalogues' languages, the default first; matcher
	// picks among them by the payer's Accept-Language.
	order   []string
	matcher language.Matcher
	assets  map[string]asset
	log     *slog.Logger
	// networks is Config.Networks as the page config holds them.
	networks map[uint64]pageNetwork

	// The claim page of a refund (claim.go).
	claimPage  *template.Template
	claimLangs map[string]map[string]string
}

type asset struct {
	body        []byte
	contentType string
	etag        string
}

// New returns a Handler.
func New(cfg Config) (*Handler, error) {
	cfg.fill()
	if cfg.RPCURL != "" {
		if u, err := url.Parse(cfg.RPCURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, errors.New("checkout: RPCURL must be an absolute http(s) URL")
		}
	}
	if cfg.NativeDecimals < 0 || cfg.NativeDecimals > 77 {
		return nil, errors.New("checkout: NativeDecimals must lie within [0, 77]")
	}
	if cfg.LateWindow < 0 || cfg.PollInterval < 100*time.Millisecond {
		return nil, errors.New("checkout: LateWindow must not be negative and PollInterval at least 100 ms")
	}
	if err := validateNetworks(cfg.Networks); err != nil {
		return nil, err
	}
	if err := checkTemplate("checkout: ExplorerTxURL", cfg.ExplorerTxURL, "{tx}"); err != nil {
		return nil, err
	}
	if err := checkTemplate("checkout: ExplorerAddressURL", cfg.ExplorerAddressURL, "{address}"); err != nil {
		return nil, err
	}
	for _, a := range cfg.FrameAncestors {
		if a == "" || strings.ContainsAny(a, ";,\r\n") {
			return nil, fmt.Errorf("checkout: FrameAncestors: bad source %q", a)
		}
	}
	langs, err := loadCatalogue(cfg.DefaultLanguage)
	if err != nil {
		return nil, err
	}
	page, err := template.ParseFS(files, "page.html")
	if err != nil {
		return nil, fmt.Errorf("checkout: page.html: %w", err)
	}
	h := &Handler{cfg: cfg, csp: contentSecurityPolicy(cfg.FrameAncestors), page: page, langs: langs,
		assets: map[string]asset{}, log: cfg.Logger}
	if len(cfg.Networks) > 0 {
		h.networks = make(map[uint64]pageNetwork, len(cfg.Networks))
		for _, n := range cfg.Networks {
			h.networks[n.ChainID] = pageNetwork{Name: n.Name, NativeSymbol: n.NativeSymbol, RPCURL: n.RPCURL,
				ExplorerTx: n.ExplorerTxURL, ExplorerAddr: n.ExplorerAddressURL,
				ExplorerBase: explorerBase(n.ExplorerTxURL, n.ExplorerAddressURL)}
		}
	}
	h.order = []string{strings.ToLower(cfg.DefaultLanguage)}
	for _, l := range h.Languages() {
		if l != h.order[0] {
			h.order = append(h.order, l)
		}
	}
	tags := make([]language.Tag, len(h.order))
	for i, l := range h.order {
		if tags[i], err = language.Parse(l); err != nil {
			return nil, fmt.Errorf("checkout: messages/%s.json: %w", l, err)
		}
	}
	h.matcher = language.NewMatcher(tags)
	err = fs.WalkDir(files, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		h.assets[path.Base(p)] = asset{body: b, contentType: contentTypes[path.Ext(p)],
			etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("checkout: assets: %w", err)
	}
	if err := h.loadClaim(); err != nil {
		return nil, err
	}
	return h, nil
}

// checkTemplate checks an explorer URL template: "" or an absolute http(s)
// URL holding placeholder exactly once.
func checkTemplate(name, tpl, placeholder string) error {
	if tpl == "" {
		return nil
	}
	u, err := url.Parse(strings.Replace(tpl, placeholder, "x", 1))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Count(tpl, placeholder) != 1 {
		return fmt.Errorf("%s must be an absolute http(s) URL with %s once, e.g. https://explorer.example/…/%s", name, placeholder, placeholder)
	}
	return nil
}

var contentTypes = map[string]string{
	".js":  "text/javascript; charset=utf-8",
	".css": "text/css; charset=utf-8",
	".svg": "image/svg+xml",
}

// loadCatalogue reads messages/<lang>.json, one file per language. Every
// language is completed with the default language's messages, so a
// translation that lags behind shows the default's words, never a key.
func loadCatalogue(def string) (map[string]map[string]string, error) {
	names, err := fs.Glob(files, "messages/*.json")
	if err != nil {
		return nil, err
	}
	langs := map[string]map[string]string{}
	for _, n := range names {
		b, err := files.ReadFile(n)
		if err != nil {
			return nil, err
		}
		var m map[string]string
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("checkout: %s: %w", n, err)
		}
		langs[strings.ToLower(strings.TrimSuffix(path.Base(n), ".json"))] = m
	}
	base, ok := langs[strings.ToLower(def)]
	if !ok {
		return nil, fmt.Errorf("checkout: DefaultLanguage %q has no messages/%s.json", def, def)
	}
	for _, m := range langs {
		for k, v := range base {
			if _, ok := m[k]; !ok {
				m[k] = v
			}
		}
	}
	return langs, nil
}

// Languages lists the languages of the message catalogue.
func (h *Handler) Languages() []string {
	out := make([]string, 0, len(h.langs))
	for l := range h.langs {
		out = append(out, l)
	}
	slices.Sort(out)
	return out
}

// contentSecurityPolicy allows the page's own script, style and API calls,
// the QR image it makes from the API's SVG (a blob: URL), and nothing else:
// no inline script or style, nothing third-party.
func contentSecurityPolicy(frameAncestors []string) string {
	fa := "'none'"
	if len(frameAncestors) > 0 {
		fa = strings.Join(frameAncestors, " ")
	}
	return "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' blob:; " +
		"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors " + fa
}

// Routes registers /checkout and everything below it on mux, for every
// method: the handler answers its own 404 and 405, so that every response
// under /checkout carries the page's security headers. It serves GET (and
// HEAD) of /checkout and /checkout/assets/{name}, and of /claim, the claim
// page of a refund (claim.go).
func (h *Handler) Routes(mux httpapi.Router) {
	mux.Handle("/checkout", h)
	mux.Handle("/checkout/", h)
	mux.Handle("/claim", h)
}

// ServeHTTP serves the page at …/checkout and its assets at
// …/checkout/assets/<name>, whatever prefix it is mounted under. Every
// answer carries the security headers.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", h.csp)
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Content-Type-Options", "nosniff")
	if len(h.cfg.FrameAncestors) == 0 {
		hd.Set("X-Frame-Options", "DENY") // for browsers without frame-ancestors
	}
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	hd.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=(), payment=()")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hd.Set("Allow", "GET, HEAD")
		problem.Reply(w, problem.CodeMethodNotAllowed, r.Method+" is not allowed here; allowed: GET, HEAD")
		return
	}
	p := r.URL.Path
	if i := strings.LastIndex(p, "/checkout/assets/"); i >= 0 {
		h.serveAsset(w, r, p[i+len("/checkout/assets/"):])
		return
	}
	if strings.HasSuffix(p, "/claim") {
		h.serveClaim(w, r)
		return
	}
	if !strings.HasSuffix(p, "/checkout") {
		problem.Reply(w, problem.CodeNotFound, "no such resource: "+p)
		return
	}
	h.servePage(w, r)
}

// serveAsset serves an embedded asset with http.ServeContent: its ETag
// answers If-None-Match (304), ranges and HEAD as the standard library does.
func (h *Handler) serveAsset(w http.ResponseWriter, r *http.Request, name string) {
	a, ok := h.assets[name]
	if !ok {
		problem.Reply(w, problem.CodeNotFound, "no such asset: "+name)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", a.contentType)
	hd.Set("ETag", a.etag)
	hd.Set("Cache-Control", "public, max-age=300")
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(a.body))
}

// pageConfig is what the script needs besides the invoice, in the page's
// data-config attribute.
type pageConfig struct {
	ChainName      string `json:"chain_name"`
	NativeSymbol   string `json:"native_symbol"`
	NativeDecimals int    `json:"native_decimals"`
	RPCURL         string `json:"rpc_url"`
	PollMillis     int64  `json:"poll_ms"`
	LateHours      int64  `json:"late_hours"`
	ExplorerTx     string `json:"explorer_tx,omitempty"`
	ExplorerAddr   string `json:"explorer_address,omitempty"`
	// ExplorerBase is the explorer's base URL offered to a wallet
	// (blockExplorerUrls), derived from the templates.
	ExplorerBase string `json:"explorer,omitempty"`
	// RedirectMillis is -1 for "never automatically".
	RedirectMillis int64 `json:"redirect_ms"`
	// Networks holds Config.Networks by chain id; a chain not listed is
	// described by the members above.
	Networks map[uint64]pageNetwork `json:"networks,omitempty"`
}

// pageNetwork is one Network as the script reads it, in the members of
// pageConfig that describe a chain.
type pageNetwork struct {
	Name         string `json:"chain_name,omitempty"`
	NativeSymbol string `json:"native_symbol"`
	RPCURL       string `json:"rpc_url,omitempty"`
	ExplorerTx   string `json:"explorer_tx,omitempty"`
	ExplorerAddr string `json:"explorer_address,omitempty"`
	ExplorerBase string `json:"explorer,omitempty"`
}

// explorerBase is the block explorer's URL that EIP-3085 wants in
// blockExplorerUrls, from the templates: what comes before "/tx/{tx}" or
// "/address/{address}" (wallets append those to it), else the origin of
// either template; "" without one.
func explorerBase(tx, address string) string {
	if b, ok := strings.CutSuffix(tx, "/tx/{tx}"); ok {
		return b
	}
	if b, ok := strings.CutSuffix(address, "/address/{address}"); ok {
		return b
	}
	for _, tpl := range []string{tx, address} {
		if u, err := url.Parse(strings.NewReplacer("{tx}", "x", "{address}", "x").Replace(tpl)); err == nil && u.Host != "" {
			return u.Scheme + "://" + u.Host
		}
	}
	return ""
}

type pageData struct {
	Lang     string
	M        map[string]string
	Config   string
	Messages string
	Langs    []langLink
}

// langLink is one entry of the page's language switcher, named in its own
// language.
type langLink struct {
	Code, Name string
	Current    bool
}

func (h *Handler) servePage(w http.ResponseWriter, r *http.Request) {
	h.render(w, r, h.page, h.langs)
}

// render answers a page of the handler (the checkout page, the claim
// page) in the request's language: the template with its messages, and
// the configuration its script reads.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, page *template.Template, catalogue map[string]map[string]string) {
	lang := h.negotiate(r)
	m := catalogue[lang]
	redirect := h.cfg.RedirectAfter.Milliseconds()
	if redirect < 0 {
		redirect = -1
	}
	cfg, _ := json.Marshal(pageConfig{ChainName: h.cfg.ChainName, NativeSymbol: h.cfg.NativeSymbol,
		NativeDecimals: h.cfg.NativeDecimals, RPCURL: h.cfg.RPCURL,
		PollMillis: h.cfg.PollInterval.Milliseconds(), LateHours: int64(h.cfg.LateWindow / time.Hour),
		ExplorerTx: h.cfg.ExplorerTxURL, ExplorerAddr: h.cfg.ExplorerAddressURL,
		ExplorerBase: explorerBase(h.cfg.ExplorerTxURL, h.cfg.ExplorerAddressURL), RedirectMillis: redirect,
		Networks: h.networks})
	msgs, _ := json.Marshal(m)
	links := make([]langLink, 0, len(catalogue))
	for _, l := range h.Languages() {
		links = append(links, langLink{Code: l, Name: catalogue[l]["language_name"], Current: l == lang})
	}
	var buf bytes.Buffer
	if err := page.Execute(&buf, pageData{Lang: lang, M: m, Config: string(cfg), Messages: string(msgs), Langs: links}); err != nil {
		h.log.ErrorContext(r.Context(), "checkout page", slog.String("error", err.Error()))
		problem.Reply(w, problem.CodeInternal, "the page could not be rendered")
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Content-Language", lang)
	hd.Set("Vary", "Accept-Language")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(buf.Bytes())
	}
}

// negotiate picks the page's language: ?lang= when the catalogue has it,
// else the best Accept-Language match (a tag or its primary subtag), else
// the default.
func (h *Handler) negotiate(r *http.Request) string {
	if l := h.match(r.URL.Query().Get("lang")); l != "" {
		return l
	}
	// RFC 9110 Accept-Language, parsed and matched by x/text: weights,
	// regions ("de-CH" is de), scripts and q=0 exclusions as its matcher
	// ranks them. x/text refuses a whole header for one tag it does not
	// know ("xx"), so each range is parsed alone and the unknown ones are
	// left out.
	type pref struct {
		tag language.Tag
		q   float32
	}
	var prefs []pref
	for _, part := range strings.Split(r.Header.Get("Accept-Language"), ",") {
		if t, q, err := language.ParseAcceptLanguage(part); err == nil && len(t) == 1 {
			prefs = append(prefs, pref{t[0], q[0]})
		}
	}
	if len(prefs) == 0 {
		return h.order[0]
	}
	slices.SortStableFunc(prefs, func(a, b pref) int { return cmp.Compare(b.q, a.q) })
	tags := make([]language.Tag, len(prefs))
	for i, p := range prefs {
		tags[i] = p.tag
	}
	_, i, conf := h.matcher.Match(tags...)
	if conf == language.No {
		return h.order[0]
	}
	return h.order[i]
}

// match is the catalogue of one language tag (the switcher's ?lang=), or ""
// when none fits.
func (h *Handler) match(tag string) string {
	if tag == "" || len(tag) > 35 {
		return ""
	}
	t, err := language.Parse(tag)
	if err != nil {
		return ""
	}
	_, i, conf := h.matcher.Match(t)
	if conf == language.No {
		return ""
	}
	return h.order[i]
}
