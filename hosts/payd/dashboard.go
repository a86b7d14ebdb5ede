package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"

	"github.com/evmpay/evmpay/hdwallet"
	"github.com/evmpay/evmpay/hosts/dashboard"
	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres"
	"github.com/evmpay/evmpay/webhook"
)

// buildDashboard mounts the merchant dashboard (hosts/dashboard,
// docs/dashboard.md) at /dashboard on the API listener. It needs an
// absolute public URL (PUBLIC_BASE_URL; payd dev its own address, with
// "localhost" for 127.0.0.1, since passkeys are bound to a domain name):
// without one it stays off.
func (a *app) buildDashboard(ctx context.Context) error {
	base := a.publicBaseURL()
	if base == "" {
		a.log.Info("the merchant dashboard is off: it needs PUBLIC_BASE_URL (its links and passkeys name it)")
		return nil
	}
	if a.cfg.selfBaseURL {
		if u, err := url.Parse(base); err == nil && u.Hostname() == "127.0.0.1" {
			u.Host = "localhost:" + u.Port()
			base = u.String()
		}
	}
	key, err := loadSecretKey(ctx, a.cfg.keys)
	if err != nil {
		return err
	}
	deliveries, err := webhook.NewDeliveriesAPI(a.st, dashboard.DeliveriesAuthenticator{},
		webhook.DeliveriesAPIConfig{Logger: a.log.With("component", "webhook")})
	if err != nil {
		return err
	}
	cfg := dashboard.Config{
		PublicURL:      base + "/dashboard",
		SecretKey:      key,
		TrustedProxies: a.cfg.trustedProxies,
		Deliveries:     deliveries,
		Logger:         a.log.With("component", "dashboard"),
	}
	if a.cfg.mailer != nil { // a nil *SMTPMailer is not a nil Mailer
		cfg.Mailer = a.cfg.mailer
		a.log.Info("the dashboard mails invitations and password resets", slog.String("smtp", a.cfg.mailer.String()))
	}
	a.dashboard, err = dashboard.New(a.invoices, a.st, cfg)
	if err != nil {
		return err
	}
	a.mux.Handle("/dashboard/", a.dashboard)
	return nil
}

// devDashboardBanner gives payd dev's demo merchant an owner in the
// dashboard and prints its URL and a one-time sign-in link.
func devDashboardBanner(ctx context.Context, a *app, merchantID int64) (string, error) {
	if a.dashboard == nil {
		return "", nil
	}
	u, err := a.dashboard.EnsureUser(ctx, merchantID, "demo@example.com", store.RoleOwner, "")
	if err != nil {
		return "", err
	}
	link, err := a.dashboard.SignInLink(ctx, u.ID, "payd dev")
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("  Merchant dashboard  %s/   (user %s, owner)\n    one-time sign-in link: %s\n"+
		"    (then set a password or add a passkey under \"Your account\")\n\n", a.dashboard.URL(), u.Email, link), nil
}

// runDashboardUser is `payd dashboard-user --merchant ID --email E
// [--role owner]`: the operator gives a merchant a dashboard user (the
// first owner) and gets a one-time sign-in link to hand over. It needs
// DATABASE_URL, PUBLIC_BASE_URL, PAY_SECRET_KEY_FILE and PAY_XPUB (or the
// mnemonic), like the api role.
func runDashboardUser(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("dashboard-user")
	merchant := fs.Int64("merchant", 0, "the merchant's id")
	email := fs.String("email", "", "the user's email")
	role := fs.String("role", store.RoleOwner, "owner, approver, accountant, developer or viewer")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *merchant <= 0 || !strings.Contains(*email, "@") {
		return usageError("usage: payd dashboard-user --merchant ID --email ADDRESS [--role owner]")
	}
	dbURL, base := os.Getenv("DATABASE_URL"), strings.TrimRight(os.Getenv("PUBLIC_BASE_URL"), "/")
	if dbURL == "" || base == "" {
		return errors.New("payd dashboard-user: set DATABASE_URL and PUBLIC_BASE_URL")
	}
	kr, err := newKeyring(ctx, os.Getenv, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	defer kr.Close()
	key, err := loadSecretKey(ctx, kr)
	if err != nil {
		return err
	}
	creds, err := invoice.NewCredentials(key)
	if err != nil {
		return err
	}
	var deriver *hdwallet.Deriver
	if xpub := os.Getenv("PAY_XPUB"); xpub != "" {
		deriver, err = hdwallet.NewDeriver(xpub)
	} else {
		var w *hdwallet.Wallet
		if w, err = loadWallet(ctx, kr); err == nil {
			deriver = w.Deriver()
			w.Wipe()
		}
	}
	if err != nil {
		return err
	}
	st, err := postgres.Open(ctx, dbURL, postgres.Config{MaxOpenConns: 2})
	if err != nil {
		return err
	}
	defer st.Close()
	// The chain id is not used to make a user; the service needs one.
	svc, err := invoice.New(st, creds, deriver, 1, invoice.Config{BaseURL: base})
	if err != nil {
		return err
	}
	d, err := dashboard.New(svc, st, dashboard.Config{PublicURL: base + "/dashboard", SecretKey: key})
	if err != nil {
		return err
	}
	u, err := d.EnsureUser(ctx, *merchant, strings.ToLower(*email), *role, "")
	if err != nil {
		return err
	}
	link, err := d.SignInLink(ctx, u.ID, "operator")
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "dashboard user %s (%s) of merchant %d\none-time sign-in link (valid 72 h, works once): %s\n",
		u.Email, u.Role, u.MerchantID, link)
	return nil
}
