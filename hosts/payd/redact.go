package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/evmpay/evmpay/rpcproxy/nodes"
)

// Node URLs carry credentials: hosted nodes put an API key in the query
// (?apikey=K), in the path (/v3/<key>) or in the userinfo (user:pw@). Every
// place payd prints a node URL goes through redactURL, and every log line
// and startup error of a process that knows the URL goes through a
// redactor, because errors of Go's HTTP client embed the URL they failed
// on (with the password masked, but the query and path in clear).

// redacted replaces a secret in printed text.
const redacted = "xxxxx"

// keyLikeSegment is a path segment that looks like an API key: 16 or more
// letters, digits, '-' or '_', with at least one digit.
var keyLikeSegment = regexp.MustCompile(`^[A-Za-z0-9_-]{16,}$`)

func looksLikeKey(seg string) bool {
	return keyLikeSegment.MatchString(seg) && strings.ContainsAny(seg, "0123456789")
}

// redactURL returns u with its userinfo password (or a lone username,
// which is how some providers pass a key), every query value and every
// key-like path segment replaced by xxxxx: the rule of rpcproxy/nodes,
// which names its nodes the same way.
func redactURL(u string) string { return nodes.RedactURL(u) }

// redactedNodes is RPC_URL's nodes, each redacted, comma-separated.
func redactedNodes(list string) string {
	urls := nodeURLs(list)
	for i, u := range urls {
		urls[i] = redactURL(u)
	}
	return strings.Join(urls, ",")
}

// urlInText finds URLs in free text (error messages quote them).
var urlInText = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>]+`)

// redactor removes node credentials from text: every URL in it is passed
// through redactURL, and the secret parts of the configured node URLs are
// replaced wherever else they appear (escaped or not).
type redactor struct {
	secrets []string // longest first
}

// newRedactor knows the secrets of the given node URLs: the password (or a
// lone username), every query value and every key-like path segment.
func newRedactor(nodeURLs ...string) *redactor {
	r := &redactor{}
	add := r.add
	for _, raw := range nodeURLs {
		p, err := url.Parse(raw)
		if err != nil {
			add(raw)
			continue
		}
		if p.User != nil {
			pw, ok := p.User.Password()
			if ok {
				add(pw)
			} else {
				add(p.User.Username())
			}
		}
		for _, vs := range p.Query() {
			for _, v := range vs {
				add(v)
			}
		}
		for _, s := range strings.Split(p.Path, "/") {
			if looksLikeKey(s) {
				add(s)
			}
		}
	}
	return r
}

// add makes s (and its URL-escaped form) a secret. Values shorter than six
// characters ("1", "true") are no secret and would mangle every line.
func (r *redactor) add(s string) {
	for _, v := range []string{s, url.QueryEscape(s)} {
		if len(v) < 6 || slices.Contains(r.secrets, v) {
			continue
		}
		r.secrets = append(r.secrets, v)
	}
	sort.Slice(r.secrets, func(i, j int) bool { return len(r.secrets[i]) > len(r.secrets[j]) })
}

// String returns s without node credentials.
func (r *redactor) String(s string) string {
	if strings.Contains(s, "://") {
		s = urlInText.ReplaceAllStringFunc(s, func(u string) string {
			// A URL quoted in an error may end in punctuation of the text.
			trimmed := strings.TrimRight(u, ".,;:)]}")
			return redactURL(trimmed) + u[len(trimmed):]
		})
	}
	for _, sec := range r.secrets {
		s = strings.ReplaceAll(s, sec, redacted)
	}
	return s
}

// Error returns err with a redacted message, keeping it for errors.Is and
// errors.As (a usage error stays one).
func (r *redactor) Error(err error) error {
	if err == nil {
		return nil
	}
	msg := r.String(err.Error())
	if msg == err.Error() {
		return err
	}
	return redactedError{msg: msg, err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e redactedError) Error() string { return e.msg }
func (e redactedError) Unwrap() error { return e.err }

// Handler wraps h so that every record's message and attributes (errors,
// strings, anything printed) are redacted before h sees them.
func (r *redactor) Handler(h slog.Handler) slog.Handler {
	return redactHandler{h: h, r: r}
}

type redactHandler struct {
	h slog.Handler
	r *redactor
}

func (h redactHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.h.Enabled(ctx, l) }

func (h redactHandler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.String(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.r.attr(a))
		return true
	})
	return h.h.Handle(ctx, out)
}

func (h redactHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		red[i] = h.r.attr(a)
	}
	return redactHandler{h: h.h.WithAttrs(red), r: h.r}
}

func (h redactHandler) WithGroup(name string) slog.Handler {
	return redactHandler{h: h.h.WithGroup(name), r: h.r}
}

func (r *redactor) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, r.String(v.String()))
	case slog.KindGroup:
		g := v.Group()
		red := make([]any, len(g))
		for i, ga := range g {
			red[i] = r.attr(ga)
		}
		return slog.Group(a.Key, red...)
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return slog.String(a.Key, r.String(x.Error()))
		case interface{ String() string }:
			return slog.String(a.Key, r.String(x.String()))
		default:
			if s := fmt.Sprint(x); r.String(s) != s {
				return slog.String(a.Key, r.String(s))
			}
		}
		return a
	default:
		return a
	}
}
