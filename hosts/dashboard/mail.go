package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"net/smtp"
	"net/url"
	"strings"
	"time"
)

// Mailer sends the one-time links (invitations, password resets) when the
// host has a mail server; without one (Config.Mailer nil) the owner or
// operator hands the link over.
type Mailer interface {
	Send(ctx context.Context, to, subject, body string) error
}

// SMTPMailer sends through an SMTP server with net/smtp: STARTTLS when
// the server offers it, PLAIN auth when the URL has a user (net/smtp
// refuses it without TLS except to localhost).
type SMTPMailer struct {
	addr, host string
	auth       smtp.Auth
	from       string
}

// NewSMTPMailer reads smtp://[user:password@]host:port and the From
// address.
func NewSMTPMailer(rawURL, from string) (*SMTPMailer, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "smtp" || u.Hostname() == "" || u.Port() == "" {
		return nil, errors.New("dashboard: the SMTP URL must be smtp://[user:password@]host:port")
	}
	if _, err := mail.ParseAddress(from); err != nil {
		return nil, fmt.Errorf("dashboard: the From address: %w", err)
	}
	m := &SMTPMailer{addr: u.Host, host: u.Hostname(), from: from}
	if u.User != nil {
		pw, _ := u.User.Password()
		m.auth = smtp.PlainAuth("", u.User.Username(), pw, u.Hostname())
	}
	return m, nil
}

// String keeps the password out of logs.
func (m *SMTPMailer) String() string { return "dashboard.SMTPMailer{" + m.addr + "}" }

// Send implements Mailer.
func (m *SMTPMailer) Send(ctx context.Context, to, subject, body string) error {
	if _, err := mail.ParseAddress(to); err != nil || strings.ContainsAny(to+subject, "\r\n") {
		return errors.New("dashboard: refusing a malformed mail header")
	}
	d := net.Dialer{Timeout: 10 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", m.addr)
	if err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	} else {
		_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	}
	c, err := smtp.NewClient(conn, m.host)
	if err != nil {
		conn.Close()
		return err
	}
	defer c.Close()
	if ok, _ := c.Extension("STARTTLS"); ok {
		if err := c.StartTLS(nil); err != nil {
			return err
		}
	}
	if m.auth != nil {
		if err := c.Auth(m.auth); err != nil {
			return err
		}
	}
	if err := c.Mail(m.from); err != nil {
		return err
	}
	if err := c.Rcpt(to); err != nil {
		return err
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	msg := "From: " + m.from + "\r\nTo: " + to + "\r\nSubject: " + subject +
		"\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" + strings.ReplaceAll(body, "\n", "\r\n")
	if _, err := w.Write([]byte(msg)); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return c.Quit()
}

// mailLink sends a one-time link when a Mailer is configured; it reports
// whether it was sent (the page then says so instead of showing it).
func (d *Dashboard) mailLink(ctx context.Context, to, subject, link string) bool {
	if d.cfg.Mailer == nil {
		return false
	}
	body := subject + "\n\nOpen this link to continue (it works once, for " + d.cfg.LinkTTL.String() + "):\n\n" + link + "\n"
	if err := d.cfg.Mailer.Send(context.WithoutCancel(ctx), to, subject, body); err != nil {
		d.logError(ctx, "mail a one-time link", err)
		return false
	}
	return true
}
