package main

import (
	"context"
	"fmt"
	"net/url"

	"github.com/evmpay/evmpay/hosts/dashboard"
	"github.com/evmpay/evmpay/store"
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
	a.dashboard, err = dashboard.New(a.invoices, a.st, dashboard.Config{
		PublicURL:      base + "/dashboard",
		SecretKey:      key,
		TrustedProxies: a.cfg.trustedProxies,
		Deliveries:     deliveries,
		Logger:         a.log.With("component", "dashboard"),
	})
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
