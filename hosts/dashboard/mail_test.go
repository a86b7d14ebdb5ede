package dashboard_test

import (
	"bufio"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/dashboard"
	"github.com/evmpay/evmpay/store"
)

// fakeSMTP is an SMTP server that keeps what it is sent (enough of RFC
// 5321 for net/smtp: no TLS, no auth).
type fakeSMTP struct {
	ln   net.Listener
	mu   sync.Mutex
	msgs []string
	got  chan struct{}
}

func newFakeSMTP(t *testing.T) *fakeSMTP {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f := &fakeSMTP{ln: ln, got: make(chan struct{}, 10)}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go f.serve(c)
		}
	}()
	return f
}

func (f *fakeSMTP) serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	say := func(s string) { _, _ = c.Write([]byte(s + "\r\n")) }
	say("220 fake")
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		switch cmd := strings.ToUpper(strings.TrimSpace(line)); {
		case strings.HasPrefix(cmd, "EHLO"), strings.HasPrefix(cmd, "HELO"):
			say("250 fake")
		case strings.HasPrefix(cmd, "DATA"):
			say("354 go on")
			var b strings.Builder
			for {
				l, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if l == ".\r\n" {
					break
				}
				b.WriteString(l)
			}
			f.mu.Lock()
			f.msgs = append(f.msgs, b.String())
			f.mu.Unlock()
			f.got <- struct{}{}
			say("250 kept")
		case strings.HasPrefix(cmd, "QUIT"):
			say("221 bye")
			return
		default:
			say("250 ok")
		}
	}
}

func TestInvitation_MailedWhenSMTPIsConfigured(t *testing.T) {
	t.Parallel()
	f := newFakeSMTP(t)
	m, err := dashboard.NewSMTPMailer("smtp://"+f.ln.Addr().String(), "dashboard@shop.example")
	require.NoError(t, err)
	require.NotContains(t, m.String(), "@", "no credentials in its string")
	e := newEnv(t, newSQLite(t), func(c *dashboard.Config) { c.Mailer = m })
	own := e.browser()
	own.signIn("owner@example.com")
	p := own.post("/dashboard/users/invite", url.Values{"email": {"new@example.com"}, "role": {store.RoleViewer}})
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	require.Contains(t, p.Body, `id="link-sent"`)
	require.NotContains(t, p.Body, "/dashboard/link?kind=", "the link went by mail, not on the page")
	<-f.got
	f.mu.Lock()
	msg := f.msgs[0]
	f.mu.Unlock()
	require.Contains(t, msg, "To: new@example.com")
	link := regexp.MustCompile(`http://\S+/dashboard/link\?kind=invitation#(\S+)`).FindStringSubmatch(msg)
	require.NotNil(t, link, msg)
	nb := e.browser()
	p = nb.post("/dashboard/link", url.Values{"kind": {"invitation"}, "token": {link[1]}, "password": {"a long new password"}})
	require.Equal(t, http.StatusSeeOther, p.Status, "the mailed link works")

	_, err = dashboard.NewSMTPMailer("http://x", "a@b.c")
	require.Error(t, err)
}
