package dashboard

import (
	"bytes"
	"encoding/json"
	"errors"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/problem"
)

// parsePages parses each page template with the layout.
func parsePages() (map[string]*template.Template, error) {
	names, err := fs.Glob(files, "templates/*.html")
	if err != nil {
		return nil, err
	}
	funcs := template.FuncMap{
		"lower": strings.ToLower,
		"short": func(s string) string {
			if len(s) <= 14 {
				return s
			}
			return s[:8] + "…" + s[len(s)-4:]
		},
		"deref": func(p *int64) int64 {
			if p == nil {
				return 0
			}
			return *p
		},
	}
	pages := map[string]*template.Template{}
	for _, n := range names {
		name := strings.TrimSuffix(path.Base(n), ".html")
		if name == "layout" {
			continue
		}
		t, err := template.New(name).Funcs(funcs).ParseFS(files, "templates/layout.html", n)
		if err != nil {
			return nil, err
		}
		pages[name] = t
	}
	return pages, nil
}

// langLink is an entry of the language switcher.
type langLink struct {
	Code, Name, Href string
	Current          bool
}

// pageData is what every page template gets.
type pageData struct {
	L     *locale
	S     *session
	P     string // the mount prefix
	Page  string
	Title string
	// Flash is a message key shown once (?msg=), Error an error text.
	Flash string
	Error string
	Langs []langLink
	Data  any
	// Passkeys tells whether passkeys are offered (a domain, not an IP).
	Passkeys bool
}

// May reports whether the signed-in user may use scope (for templates:
// what the server refuses anyway is only hidden here).
func (s *session) May(scope string) bool { return s.may(scope) }

func (d *Dashboard) data(r *http.Request, page, title string, v any) *pageData {
	lang := d.i18n.negotiate(r)
	l := d.i18n.locale(lang)
	pd := &pageData{L: l, S: sessionOf(r), P: d.prefix, Page: page, Title: l.T(title), Data: v, Passkeys: d.wa != nil}
	if m := r.URL.Query().Get("msg"); m != "" && len(m) < 40 {
		if _, ok := l.msgs["msg_"+m]; ok {
			pd.Flash = "msg_" + m
		}
	}
	for _, code := range d.i18n.order {
		q := url.Values{}
		for k, vs := range r.URL.Query() {
			if k != "lang" && k != "msg" {
				q[k] = vs
			}
		}
		q.Set("lang", code)
		pd.Langs = append(pd.Langs, langLink{Code: code, Name: d.i18n.langs[code]["language_name"],
			Href: r.URL.Path + "?" + q.Encode(), Current: code == lang})
	}
	return pd
}

// render writes a page with status.
func (d *Dashboard) render(w http.ResponseWriter, r *http.Request, status int, pd *pageData) {
	t, ok := d.pages[pd.Page]
	if !ok {
		d.logError(r.Context(), "render", errorf("no page %q", pd.Page))
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	if l := r.URL.Query().Get("lang"); d.i18n.langs[l] != nil {
		http.SetCookie(w, &http.Cookie{Name: langCookie, Value: l, Path: d.prefix + "/", MaxAge: 365 * 24 * 3600,
			HttpOnly: true, Secure: d.secure, SameSite: http.SameSiteLaxMode})
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", pd); err != nil {
		d.logError(r.Context(), "render "+pd.Page, err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Language", pd.L.Lang)
	w.Header().Set("Vary", "Accept-Language, Cookie")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

func (d *Dashboard) show(w http.ResponseWriter, r *http.Request, page, title string, v any) {
	d.render(w, r, http.StatusOK, d.data(r, page, title, v))
}

// fail shows err on the error page with the status of its problem code:
// the API's own problems as they are (their detail is meant for people),
// anything else a bare "something went wrong", logged.
func (d *Dashboard) fail(w http.ResponseWriter, r *http.Request, err error) {
	p := problemOf(err)
	if p.Code == problem.CodeInternal || p.Code == problem.CodeUnavailable {
		d.logError(r.Context(), r.Method+" "+r.URL.Path, err)
	}
	pd := d.data(r, "error", "error_title", nil)
	pd.Error = p.Detail
	d.render(w, r, p.Status, pd)
}

// problemOf is the problem err is answered with.
func problemOf(err error) *problem.Problem {
	var p *problem.Problem
	if errors.As(err, &p) {
		return p
	}
	if p := invoice.MerchantProblem(err); p != nil {
		return p
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		return problem.Of(problem.CodeNotFound, "no such resource")
	case errors.Is(err, invoice.ErrUnauthorized):
		return problem.Of(problem.CodeUnauthorized, "sign in again")
	case errors.Is(err, store.ErrUnavailable):
		return problem.Of(problem.CodeUnavailable, "the database is unavailable; retry later")
	}
	code := invoice.ErrorCode(err)
	if code == problem.CodeInternal || code == "" {
		return problem.Of(problem.CodeInternal, "something went wrong on our side; it was logged")
	}
	return problem.Of(code, err.Error())
}

// problem answers a JSON request's error as an RFC 9457 problem.
func (d *Dashboard) problem(w http.ResponseWriter, r *http.Request, err error) {
	p := problemOf(err)
	if p.Code == problem.CodeInternal || p.Code == problem.CodeUnavailable {
		d.logError(r.Context(), r.Method+" "+r.URL.Path, err)
	}
	problem.Write(w, p)
}

// forbidden is the server's refusal of what the user's role may not do.
func (d *Dashboard) forbidden(w http.ResponseWriter, r *http.Request) {
	if wantsJSON(r) {
		problem.Write(w, problem.Of(problem.CodeInsufficientScope, "your role does not allow this"))
		return
	}
	pd := d.data(r, "error", "error_title", nil)
	pd.Error = pd.L.T("forbidden")
	d.render(w, r, http.StatusForbidden, pd)
}

func (d *Dashboard) forbiddenCrossOrigin(w http.ResponseWriter, r *http.Request) {
	problem.Write(w, problem.Of(problem.CodeInsufficientScope, "cross-origin requests are refused (CSRF protection)"))
}

func wantsJSON(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "json") || strings.HasPrefix(r.Header.Get("Content-Type"), "application/json")
}

// redirect sends the browser to a dashboard path after a form (303), with
// a message key to show once.
func (d *Dashboard) redirect(w http.ResponseWriter, r *http.Request, p, msg string) {
	u := d.url(p)
	if msg != "" {
		sep := "?"
		if strings.Contains(u, "?") {
			sep = "&"
		}
		u += sep + "msg=" + url.QueryEscape(msg)
	}
	http.Redirect(w, r, u, http.StatusSeeOther)
}

// localPath reports whether p is a path inside the dashboard (a safe
// ?next=).
func (d *Dashboard) localPath(p string) bool {
	return strings.HasPrefix(p, d.prefix+"/") && !strings.HasPrefix(p, "//") && !strings.ContainsAny(p, "\\\r\n") &&
		!strings.Contains(p, "://")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// serveAsset serves an embedded script, style or icon.
func (d *Dashboard) serveAsset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	b, err := fs.ReadFile(d.assets, name)
	if err != nil || strings.Contains(name, "/") {
		http.NotFound(w, r)
		return
	}
	switch path.Ext(name) {
	case ".js":
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	case ".css":
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	case ".svg":
		w.Header().Set("Content-Type", "image/svg+xml")
	}
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(b)
}
