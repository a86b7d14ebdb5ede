package dashboard

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"slices"
	"strings"
	"time"

	"golang.org/x/text/language"
)

// The dashboard speaks the checkout's five languages: messages/<lang>.json,
// one file per language, each completed with the default language's
// messages. The language is ?lang= (remembered in a cookie), else the
// browser's Accept-Language, else Config.DefaultLanguage. Numbers and
// dates follow the language's conventions (exact decimal strings, never a
// float).

type catalogue struct {
	def     string
	order   []string
	langs   map[string]map[string]string
	matcher language.Matcher
}

func loadCatalogue(def string) (*catalogue, error) {
	c := &catalogue{def: def, langs: map[string]map[string]string{}}
	ents, err := fs.ReadDir(files, "messages")
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		lang := strings.TrimSuffix(e.Name(), ".json")
		b, err := fs.ReadFile(files, "messages/"+e.Name())
		if err != nil {
			return nil, err
		}
		m := map[string]string{}
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("dashboard: messages/%s: %w", e.Name(), err)
		}
		c.langs[lang] = m
		c.order = append(c.order, lang)
	}
	base, ok := c.langs[def]
	if !ok {
		return nil, fmt.Errorf("dashboard: no messages for the default language %q", def)
	}
	for _, m := range c.langs {
		for k, v := range base {
			if _, ok := m[k]; !ok {
				m[k] = v
			}
		}
	}
	slices.Sort(c.order)
	c.order = slices.DeleteFunc(c.order, func(l string) bool { return l == def })
	c.order = append([]string{def}, c.order...)
	tags := make([]language.Tag, len(c.order))
	for i, l := range c.order {
		tags[i] = language.MustParse(l)
	}
	c.matcher = language.NewMatcher(tags)
	return c, nil
}

const langCookie = "evmpay_dashboard_lang"

// negotiate picks the request's language.
func (c *catalogue) negotiate(r *http.Request) string {
	if l := r.URL.Query().Get("lang"); c.langs[l] != nil {
		return l
	}
	if ck, err := r.Cookie(langCookie); err == nil && c.langs[ck.Value] != nil {
		return ck.Value
	}
	tags, _, err := language.ParseAcceptLanguage(r.Header.Get("Accept-Language"))
	if err != nil || len(tags) == 0 {
		return c.def
	}
	_, i, conf := c.matcher.Match(tags...)
	if conf == language.No {
		return c.def
	}
	return c.order[i]
}

// locale formats for one language.
type locale struct {
	Lang     string
	msgs     map[string]string
	decimal  string
	group    string
	dateTime string
	date     string
}

func (c *catalogue) locale(lang string) *locale {
	l := &locale{Lang: lang, msgs: c.langs[lang], decimal: ".", group: ",", dateTime: "2006-01-02 15:04", date: "2006-01-02"}
	switch lang {
	case "de":
		l.decimal, l.group, l.dateTime, l.date = ",", ".", "02.01.2006 15:04", "02.01.2006"
	case "es", "pt":
		l.decimal, l.group, l.dateTime, l.date = ",", ".", "02/01/2006 15:04", "02/01/2006"
	case "fr":
		l.decimal, l.group, l.dateTime, l.date = ",", "\u202f", "02/01/2006 15:04", "02/01/2006"
	}
	return l
}

// T is the message key, its {0}, {1}… replaced by args.
func (l *locale) T(key string, args ...any) string {
	s, ok := l.msgs[key]
	if !ok {
		return key
	}
	for i, a := range args {
		s = strings.ReplaceAll(s, fmt.Sprintf("{%d}", i), fmt.Sprint(a))
	}
	return s
}

// Num formats an exact decimal string ("1234.5") with the language's
// group and decimal marks ("1.234,5"), digits untouched.
func (l *locale) Num(dec string) string {
	neg := strings.HasPrefix(dec, "-")
	dec = strings.TrimPrefix(dec, "-")
	whole, frac, hasFrac := strings.Cut(dec, ".")
	var b strings.Builder
	for i, r := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteString(l.group)
		}
		b.WriteRune(r)
	}
	if hasFrac {
		b.WriteString(l.decimal)
		b.WriteString(frac)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// When formats a time in UTC with the language's layout.
func (l *locale) When(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(l.dateTime) + " UTC"
}

// Day formats a date.
func (l *locale) Day(t time.Time) string { return t.UTC().Format(l.date) }
