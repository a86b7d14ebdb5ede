package nodes

import (
	"net/url"
	"regexp"
	"strings"
)

// Node URLs carry credentials: hosted nodes put an API key in the query
// (?apikey=K), in the path (/v3/<key>) or in the userinfo (user:pw@). The
// pool names a node by its redacted URL everywhere it prints one (logs,
// errors, Status, metric labels). The rule is payd's (hosts/payd/redact.go).

// redacted replaces a secret in printed text.
const redacted = "xxxxx"

// keyLikeSegment is a path segment that looks like an API key: 16 or more
// letters, digits, '-' or '_', with at least one digit.
var keyLikeSegment = regexp.MustCompile(`^[A-Za-z0-9_-]{16,}$`)

func looksLikeKey(seg string) bool {
	return keyLikeSegment.MatchString(seg) && strings.ContainsAny(seg, "0123456789")
}

// RedactURL returns u with its userinfo password (or a lone username,
// which is how some providers pass a key), every query value and every
// key-like path segment (16 or more letters, digits, '-' or '_' with a
// digit among them) replaced by xxxxx. Scheme, host, port and the shape of
// the path stay, so that the result still says which node it is.
func RedactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(unparsable URL)"
	}
	if p.User != nil {
		if _, ok := p.User.Password(); ok {
			p.User = url.UserPassword(p.User.Username(), redacted)
		} else {
			p.User = url.User(redacted)
		}
	}
	if p.RawQuery != "" {
		q := p.Query()
		for k := range q {
			q[k] = []string{redacted}
		}
		p.RawQuery = q.Encode()
	}
	if p.Path != "" {
		segs := strings.Split(p.Path, "/")
		for i, s := range segs {
			if looksLikeKey(s) {
				segs[i] = redacted
			}
		}
		p.Path = strings.Join(segs, "/")
		p.RawPath = ""
	}
	return p.String()
}
