package dashboard_test

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"html"
	"image"
	pngenc "image/png"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
)

func TestSignIn_PasswordOpensASessionCookieThatSignOutEnds(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, e *env) {
		b := e.browser()
		p := b.get("/dashboard/")
		require.Equal(t, http.StatusSeeOther, p.Status, "signed out: to the sign-in page")
		require.Equal(t, "/dashboard/sign-in?next=%2Fdashboard%2F", p.Location)

		p = b.signIn("Owner@Example.com")
		require.Equal(t, "/dashboard/", p.Location)
		var c *http.Cookie
		for _, ck := range b.last {
			if ck.Name == "evmpay_dashboard" {
				c = ck
			}
		}
		require.NotNil(t, c, "a session cookie")
		require.True(t, c.HttpOnly)
		require.True(t, c.Secure, "Secure on loopback too (browsers keep it there)")
		require.Equal(t, http.SameSiteLaxMode, c.SameSite)
		require.Equal(t, "/dashboard/", c.Path)

		p = b.get("/dashboard/")
		require.Equal(t, http.StatusOK, p.Status)
		require.Contains(t, p.Body, "owner@example.com")
		require.Contains(t, p.Header.Get("Content-Security-Policy"), "script-src 'self'")
		require.Equal(t, "DENY", p.Header.Get("X-Frame-Options"))

		old := c.Value
		p = b.post("/dashboard/sign-out", nil)
		require.Equal(t, http.StatusSeeOther, p.Status)
		// The old cookie no longer opens anything.
		b.cookies["evmpay_dashboard"] = &http.Cookie{Name: "evmpay_dashboard", Value: old}
		require.Equal(t, http.StatusSeeOther, b.get("/dashboard/").Status, "a revoked session is no session")

		es, err := e.st.ListAudit(ctx, store.AuditFilter{MerchantID: e.merchant.ID})
		require.NoError(t, err)
		require.Equal(t, "sign_out", es[0].Action)
		require.Equal(t, "sign_in.password", es[1].Action)
		require.Equal(t, "owner@example.com", es[1].Actor)
	})
}

func TestSignIn_RotatesTheSessionAndExpiresWhenIdle(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newSQLite(t))
	b := e.browser()
	b.signIn("owner@example.com")
	first := b.cookies["evmpay_dashboard"].Value
	b.signIn("owner@example.com")
	require.NotEqual(t, first, b.cookies["evmpay_dashboard"].Value, "a new session at every sign-in")
	stale := e.browser()
	stale.cookies["evmpay_dashboard"] = &http.Cookie{Name: "evmpay_dashboard", Value: first}
	require.Equal(t, http.StatusSeeOther, stale.get("/dashboard/").Status, "the session before the sign-in is revoked")

	require.Equal(t, http.StatusOK, b.get("/dashboard/").Status)
	e.clock.Advance(31 * time.Minute)
	require.Equal(t, http.StatusSeeOther, b.get("/dashboard/").Status, "idle 31 minutes: signed out")
}

func TestSignIn_LockoutAfterFiveFailures_AndUnknownEmailsLockAlike(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, e *env) {
		b := e.browser()
		for i := range 4 {
			p := b.post("/dashboard/sign-in", url.Values{"email": {"owner@example.com"}, "password": {"wrong password " + strconv.Itoa(i)}})
			require.Equal(t, http.StatusUnauthorized, p.Status)
			require.Contains(t, p.Body, "The email or password is wrong.")
		}
		p := b.post("/dashboard/sign-in", url.Values{"email": {"owner@example.com"}, "password": {"wrong again"}})
		require.Equal(t, http.StatusTooManyRequests, p.Status, "the fifth failure locks")
		require.Contains(t, p.Body, "locked")
		p = b.post("/dashboard/sign-in", url.Values{"email": {"owner@example.com"}, "password": {testPassword}})
		require.Equal(t, http.StatusTooManyRequests, p.Status, "locked: even the right password is refused")

		// An email without an account behaves the same.
		for range 5 {
			b.post("/dashboard/sign-in", url.Values{"email": {"nobody@example.com"}, "password": {"x"}})
		}
		p = b.post("/dashboard/sign-in", url.Values{"email": {"nobody@example.com"}, "password": {"x"}})
		require.Equal(t, http.StatusTooManyRequests, p.Status)

		e.clock.Advance(16 * time.Minute)
		b.signIn("owner@example.com")
		u, err := e.st.GetDashboardUser(ctx, e.owner.ID)
		require.NoError(t, err)
		require.Zero(t, u.FailedSignIns, "a sign-in clears the count")
		es, err := e.st.ListAudit(ctx, store.AuditFilter{MerchantID: e.merchant.ID, Action: "user.locked"})
		require.NoError(t, err)
		require.Len(t, es, 1)
	})
}

func TestSignIn_RateLimitedPerAddress(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newSQLite(t))
	b := e.browser()
	limited := 0
	for i := range 12 {
		p := b.post("/dashboard/sign-in", url.Values{"email": {"x" + strconv.Itoa(i) + "@example.com"}, "password": {"x"}})
		if p.Status == http.StatusTooManyRequests {
			limited++
			require.Contains(t, p.Body, "Too many sign-in attempts")
		}
	}
	require.Equal(t, 2, limited, "10 at once, then refused until the bucket refills")
}

func TestRoles_EachRolesForbiddenActionsAreRefusedByTheServer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newSQLite(t))
	for _, c := range []struct {
		role    string
		allowed []string // GET pages
		refused [][2]string
	}{
		{store.RoleViewer, []string{"/dashboard/invoices", "/dashboard/refunds", "/dashboard/ledger"},
			[][2]string{{"POST", "/dashboard/invoices"}, {"POST", "/dashboard/payouts"}, {"POST", "/dashboard/outbounds/1/approve"},
				{"GET", "/dashboard/users"}, {"POST", "/dashboard/settings/profile"}, {"POST", "/dashboard/settings/settlement-address"},
				{"POST", "/dashboard/links"}, {"GET", "/dashboard/invoices/new"}, {"POST", "/dashboard/webhooks/1/replay"}}},
		{store.RoleApprover, []string{"/dashboard/payouts"},
			[][2]string{{"POST", "/dashboard/invoices"}, {"POST", "/dashboard/payouts"}, {"POST", "/dashboard/users/invite"}}},
		{store.RoleAccountant, []string{"/dashboard/ledger.csv"},
			[][2]string{{"POST", "/dashboard/outbounds/1/approve"}, {"POST", "/dashboard/invoices"}, {"GET", "/dashboard/audit"}}},
		{store.RoleDeveloper, []string{"/dashboard/invoices/new", "/dashboard/webhooks"},
			[][2]string{{"POST", "/dashboard/payouts"}, {"POST", "/dashboard/outbounds/1/reject"},
				{"POST", "/dashboard/settings/settlement-address"}, {"GET", "/dashboard/users"}}},
	} {
		t.Run(c.role, func(t *testing.T) {
			e.user(c.role+"@example.com", c.role)
			b := e.browser()
			b.signIn(c.role + "@example.com")
			for _, path := range c.allowed {
				require.Equal(t, http.StatusOK, b.get(path).Status, path)
			}
			for _, rq := range c.refused {
				p := b.do(rq[0], rq[1], url.Values{"amount": {"1"}, "destination": {"0x00000000000000000000000000000000000000bb"},
					"email": {"x@example.com"}, "role": {"owner"}, "settlement_address": {"0x00000000000000000000000000000000000000cc"}})
				require.Equal(t, http.StatusForbidden, p.Status, "%s %s", rq[0], rq[1])
				require.Contains(t, p.Body, "Your role does not allow this")
			}
		})
	}
	m, err := e.api.Owner(ctx, e.merchant.ID)
	require.NoError(t, err)
	require.Equal(t, common.HexToAddress("0xaa"), m.Merchant.SettlementAddress, "nothing changed")
}

var obRe = regexp.MustCompile(`id="ob-(\d+)"`)

func TestPayout_AboveTheThreshold_ApprovedByASecondPerson_BothInTheAuditLog(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, e *env) {
		th := store.NewAmount(1000)
		require.NoError(t, e.st.PutPayoutPolicy(ctx, store.PayoutPolicy{MerchantID: e.merchant.ID,
			Assets: []store.AssetPolicy{{ApprovalThreshold: &th}}, UpdatedAt: e.clock.Now()}))
		e.user("acc@example.com", store.RoleAccountant)
		e.user("boss@example.com", store.RoleApprover)

		acc := e.browser()
		acc.signIn("acc@example.com")
		form := acc.get("/dashboard/payouts")
		require.Equal(t, http.StatusOK, form.Status)
		p := acc.post("/dashboard/payouts", url.Values{"key": {formKey(t, form.Body)}, "amount": {"0.000000000000002"},
			"asset": {"ETH"}, "destination": {"0x00000000000000000000000000000000000000bb"}, "paid_by": {"service"}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		list := acc.get("/dashboard/payouts")
		ids := obRe.FindAllStringSubmatch(list.Body, -1)
		require.Len(t, ids, 1)
		id := ids[0][1]
		require.Contains(t, list.Body, "AWAITING_APPROVAL")
		require.Contains(t, list.Body, "acc@example.com", "made by a person")
		require.NotContains(t, list.Body, "/outbounds/"+id+"/approve", "an accountant is shown no approve button")

		// The owner made nothing, but an owner that made it could not
		// approve it either: the approver is another person.
		boss := e.browser()
		boss.signIn("boss@example.com")
		p = boss.post("/dashboard/outbounds/"+id+"/approve", nil)
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)

		n, _ := strconv.ParseInt(id, 10, 64)
		o, err := e.api.Payout(ctx, e.merchant.ID, n)
		require.NoError(t, err)
		require.Equal(t, store.OutboundQueued, o.Status)
		acc2, _ := e.st.GetDashboardUserByEmail(ctx, "acc@example.com")
		boss2, _ := e.st.GetDashboardUserByEmail(ctx, "boss@example.com")
		require.Equal(t, acc2.ID, o.CreatedByUser)
		require.NotNil(t, o.ApprovedByUser)
		require.Equal(t, boss2.ID, *o.ApprovedByUser)

		es, err := e.st.ListAudit(ctx, store.AuditFilter{MerchantID: e.merchant.ID})
		require.NoError(t, err)
		var trail []string
		for _, a := range es {
			if a.Subject == "payout "+id {
				trail = append(trail, a.Actor+" "+a.Action)
			}
		}
		require.Equal(t, []string{"boss@example.com payout.approve", "acc@example.com payout.create"}, trail)

		// The owner sees who did what in the audit log page.
		own := e.browser()
		own.signIn("owner@example.com")
		a := own.get("/dashboard/audit")
		require.Equal(t, http.StatusOK, a.Status)
		require.Contains(t, a.Body, "payout.approve")
		require.Contains(t, a.Body, "boss@example.com")
	})
}

func TestApproval_TheSamePersonCannotApproveWhatTheyMade(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newSQLite(t))
	th := store.NewAmount(1000)
	require.NoError(t, e.st.PutPayoutPolicy(ctx, store.PayoutPolicy{MerchantID: e.merchant.ID,
		Assets: []store.AssetPolicy{{ApprovalThreshold: &th}}, UpdatedAt: e.clock.Now()}))
	b := e.browser()
	b.signIn("owner@example.com")
	form := b.get("/dashboard/payouts")
	p := b.post("/dashboard/payouts", url.Values{"key": {formKey(t, form.Body)}, "amount": {"0.000000000000002"},
		"asset": {"ETH"}, "destination": {"0x00000000000000000000000000000000000000bb"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	id := obRe.FindStringSubmatch(b.get("/dashboard/payouts").Body)[1]
	p = b.post("/dashboard/outbounds/"+id+"/approve", nil)
	require.Equal(t, http.StatusForbidden, p.Status)
	require.Contains(t, p.Body, "cannot approve it")

	// The merchant's own API key (no person) may: another (key, user).
	n, _ := strconv.ParseInt(id, 10, 64)
	owner, err := e.api.Owner(ctx, e.merchant.ID)
	require.NoError(t, err)
	o, err := e.api.Approve(ctx, owner, n)
	require.NoError(t, err)
	require.Equal(t, store.OutboundQueued, o.Status)

	// A replayed form makes nothing new.
	p = b.post("/dashboard/payouts", url.Values{"key": {formKey(t, form.Body)}, "amount": {"0.000000000000002"},
		"asset": {"ETH"}, "destination": {"0x00000000000000000000000000000000000000bb"}})
	require.Equal(t, http.StatusSeeOther, p.Status)
	require.Len(t, obRe.FindAllString(b.get("/dashboard/payouts").Body, -1), 1, "one payout for one form")
}

func TestSettlementAddress_RefusedWithoutAFreshSecondFactor_ChangedWithTOTP(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, e *env) {
		b := e.browser()
		b.signIn("owner@example.com")
		newAddr := "0x00000000000000000000000000000000000000Cc"
		p := b.post("/dashboard/settings/settlement-address", url.Values{"settlement_address": {strings.ToLower(newAddr)}})
		require.Equal(t, http.StatusForbidden, p.Status)
		require.Contains(t, p.Body, "fresh second factor")

		// Set up TOTP: the secret is shown once, sealed in the database.
		setup := b.post("/dashboard/account/totp/begin", nil)
		require.Equal(t, http.StatusOK, setup.Status)
		key := regexp.MustCompile(`id="totp-key">([A-Z2-7]+)<`).FindStringSubmatch(setup.Body)
		require.NotNil(t, key)
		u, err := e.st.GetDashboardUser(ctx, e.owner.ID)
		require.NoError(t, err)
		require.NotContains(t, string(u.TOTPSecret), key[1], "sealed, not in the clear")
		p = b.post("/dashboard/account/totp/confirm", url.Values{"code": {totpNow(t, key[1], e.clock.Now())}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)

		// Enabling passed a second factor; five minutes later it is stale.
		e.clock.Advance(6 * time.Minute)
		p = b.post("/dashboard/settings/settlement-address", url.Values{"settlement_address": {strings.ToLower(newAddr)}})
		require.Equal(t, http.StatusForbidden, p.Status)

		// The same code again is refused (each step once); the next one works.
		e.clock.Advance(30 * time.Second)
		code := totpNow(t, key[1], e.clock.Now())
		require.Equal(t, http.StatusSeeOther, b.post("/dashboard/account/second-factor", url.Values{"code": {code}, "next": {"/dashboard/settings"}}).Status)
		require.Equal(t, http.StatusUnauthorized, b.post("/dashboard/account/second-factor", url.Values{"code": {code}}).Status, "a code is used once")
		p = b.post("/dashboard/settings/settlement-address", url.Values{"settlement_address": {strings.ToLower(newAddr)}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)

		m, err := e.api.Owner(ctx, e.merchant.ID)
		require.NoError(t, err)
		require.Equal(t, common.HexToAddress(newAddr), m.Merchant.SettlementAddress)
		es, err := e.st.ListAudit(ctx, store.AuditFilter{MerchantID: e.merchant.ID, Action: "settlement_address.change"})
		require.NoError(t, err)
		require.Len(t, es, 1)
		require.Equal(t, "owner@example.com", es[0].Actor)
		refused, err := e.st.ListAudit(ctx, store.AuditFilter{MerchantID: e.merchant.ID, Action: "settlement_address.refused"})
		require.NoError(t, err)
		require.Len(t, refused, 2)
		// The event names the person.
		db := e.st.(interface{ DB() *sqlx.DB }).DB()
		var data string
		require.NoError(t, db.QueryRowxContext(ctx, db.Rebind(`SELECT data FROM events WHERE type = ? AND merchant_id = ?`),
			"merchant.settlement_address_changed", e.merchant.ID).Scan(&data))
		require.Contains(t, data, `"changed_by":"user:`+strconv.FormatInt(e.owner.ID, 10)+`"`, "the event names the person")
		found := true
		require.True(t, found, "the change's event")
	})
}

func TestTOTP_APasswordSignInThenNeedsTheCode(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newSQLite(t))
	b := e.browser()
	b.signIn("owner@example.com")
	setup := b.post("/dashboard/account/totp/begin", nil)
	key := regexp.MustCompile(`id="totp-key">([A-Z2-7]+)<`).FindStringSubmatch(setup.Body)[1]
	require.Equal(t, http.StatusSeeOther, b.post("/dashboard/account/totp/confirm", url.Values{"code": {totpNow(t, key, e.clock.Now())}}).Status)

	c := e.browser()
	p := c.signIn("owner@example.com")
	require.Equal(t, "/dashboard/sign-in/second-factor", p.Location)
	require.Equal(t, "/dashboard/sign-in/second-factor", c.get("/dashboard/invoices").Location, "a pending session opens nothing")
	p = c.post("/dashboard/sign-in/second-factor", url.Values{"code": {"000000"}})
	require.Equal(t, http.StatusUnauthorized, p.Status)
	e.clock.Advance(30 * time.Second)
	p = c.post("/dashboard/sign-in/second-factor", url.Values{"code": {totpNow(t, key, e.clock.Now())}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.Equal(t, http.StatusOK, c.get("/dashboard/invoices").Status)
}

func TestInvitationAndResetLink_UsedOnce(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, e *env) {
		own := e.browser()
		own.signIn("owner@example.com")
		p := own.post("/dashboard/users/invite", url.Values{"email": {"new@example.com"}, "role": {store.RoleViewer}})
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		link := html.UnescapeString(regexp.MustCompile(`id="made-link" readonly value="([^"]+)"`).FindStringSubmatch(p.Body)[1])
		u, err := url.Parse(link)
		require.NoError(t, err)
		require.NotEmpty(t, u.Fragment, "the token is in the fragment")
		require.Equal(t, "invitation", u.Query().Get("kind"))

		nb := e.browser()
		require.Equal(t, http.StatusOK, nb.get(u.Path+"?"+u.RawQuery).Status)
		p = nb.post("/dashboard/link", url.Values{"kind": {"invitation"}, "token": {u.Fragment}, "password": {"short"}})
		require.Equal(t, http.StatusBadRequest, p.Status, "a short password")
		p = nb.post("/dashboard/link", url.Values{"kind": {"invitation"}, "token": {u.Fragment}, "password": {"a long new password"}})
		require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
		require.Equal(t, http.StatusOK, nb.get("/dashboard/invoices").Status, "signed in as the new viewer")
		require.Equal(t, http.StatusNotFound, e.browser().post("/dashboard/link", url.Values{"kind": {"invitation"},
			"token": {u.Fragment}, "password": {"a long new password"}}).Status, "used once")

		nu, err := e.st.GetDashboardUserByEmail(ctx, "new@example.com")
		require.NoError(t, err)
		require.Equal(t, store.RoleViewer, nu.Role)
		p = own.post("/dashboard/users/"+strconv.FormatInt(nu.ID, 10)+"/reset-link", nil)
		require.Equal(t, http.StatusOK, p.Status)
		reset, _ := url.Parse(html.UnescapeString(regexp.MustCompile(`id="made-link" readonly value="([^"]+)"`).FindStringSubmatch(p.Body)[1]))
		p = e.browser().post("/dashboard/link", url.Values{"kind": {"reset"}, "token": {reset.Fragment}, "password": {"another long password"}})
		require.Equal(t, http.StatusSeeOther, p.Status)
		require.Equal(t, http.StatusSeeOther, nb.get("/dashboard/invoices").Status, "a reset ends the user's other sessions")
		q := e.browser().post("/dashboard/sign-in", url.Values{"email": {"new@example.com"}, "password": {"another long password"}})
		require.Equal(t, http.StatusSeeOther, q.Status)
	})
}

func TestInvoices_CreateListFilterAndCSVExport(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, e *env) {
		e.user("dev@example.com", store.RoleDeveloper)
		b := e.browser()
		b.signIn("dev@example.com")
		var ids []string
		for i, amt := range []string{"0.5", "1.25", "3"} {
			form := b.get("/dashboard/invoices/new")
			require.Equal(t, http.StatusOK, form.Status)
			p := b.post("/dashboard/invoices", url.Values{"key": {formKey(t, form.Body)}, "amount": {amt}, "asset": {"ETH"},
				"order_id": {"order-" + strconv.Itoa(i)}, "description": {"=cmd|' /C calc'!A0"}})
			require.Equal(t, http.StatusOK, p.Status, p.Body)
			require.Contains(t, p.Body, "/checkout#", "the checkout link, once")
			ids = append(ids, regexp.MustCompile(`id="created-id">(\d+)<`).FindStringSubmatch(p.Body)[1])
		}
		e.clock.Advance(20 * time.Minute)
		list := b.get("/dashboard/invoices?status=PENDING")
		require.Equal(t, http.StatusOK, list.Status)
		for _, id := range ids {
			require.Contains(t, list.Body, `href="/dashboard/invoices/`+id+`"`)
		}
		require.NotContains(t, b.get("/dashboard/invoices?status=PAID").Body, `href="/dashboard/invoices/`+ids[0]+`"`)

		res := b.get("/dashboard/invoices.csv?status=PENDING")
		require.Equal(t, http.StatusOK, res.Status)
		require.Equal(t, "text/csv; charset=utf-8", res.Header.Get("Content-Type"))
		rows, err := csv.NewReader(strings.NewReader(res.Body)).ReadAll()
		require.NoError(t, err)
		require.Len(t, rows, 4)
		require.Equal(t, "id", rows[0][0])
		require.Equal(t, []string{ids[2], "PENDING", "ETH", "3000000000000000000", "3"}, rows[1][:5], "newest first, exact amounts")
		require.Equal(t, "'=cmd|' /C calc'!A0", rows[1][10], "a formula stays text in a spreadsheet")

		// Search and the filters the Go API lacked (invoice.SearchInvoices).
		first, err := strconv.ParseInt(ids[0], 10, 64)
		require.NoError(t, err)
		v, err := e.api.Invoice(ctx, e.merchant.ID, first)
		require.NoError(t, err)
		shown := func(q string) []string {
			p := b.get("/dashboard/invoices?" + q)
			require.Equal(t, http.StatusOK, p.Status, q)
			var got []string
			for _, m := range regexp.MustCompile(`href="/dashboard/invoices/(\d+)"`).FindAllStringSubmatch(p.Body, -1) {
				got = append(got, m[1])
			}
			return got
		}
		require.Equal(t, []string{ids[0]}, shown("q="+strings.ToLower(v.DepositAddress.String())), "by deposit address")
		require.Equal(t, []string{ids[1]}, shown("q=order-1"), "by order id")
		require.Equal(t, []string{ids[2]}, shown("q="+ids[2]), "by id")
		require.Empty(t, shown("q=0x"+strings.Repeat("ab", 32)), "by a transaction hash that paid nothing")
		require.Equal(t, []string{ids[2], ids[1]}, shown("asset=ETH&min=1&max=3"), "amount range, inclusive")
		require.Equal(t, []string{ids[0]}, shown("asset=ETH&max=0.5"))
		require.Equal(t, http.StatusBadRequest, b.get("/dashboard/invoices?asset=USDC").Status, "an asset the service does not accept")
		require.Equal(t, http.StatusBadRequest, b.get("/dashboard/invoices?min=1").Status, "a range needs an asset")
		rows2, err := csv.NewReader(strings.NewReader(b.get("/dashboard/invoices.csv?asset=ETH&min=1").Body)).ReadAll()
		require.NoError(t, err)
		require.Len(t, rows2, 3, "the export has the list's filters")

		inv := b.get("/dashboard/invoices/" + ids[0])
		require.Equal(t, http.StatusOK, inv.Status)
		require.Contains(t, inv.Body, `id="timeline"`)
		require.NotContains(t, inv.Body, `id="refund-form"`, "a developer is offered no refund")
		require.NotContains(t, inv.Body, `id="inv-chain"`, "one chain: no network to name")

		// Another merchant's invoice is not found, like a missing one.
		other, err := e.api.CreateMerchant(ctx, invoice.MerchantParams{Name: "Other", SettlementAddress: e.merchant.SettlementAddress})
		require.NoError(t, err)
		owner, _ := e.api.Owner(ctx, other.Merchant.ID)
		oi, err := e.api.CreateInvoice(ctx, owner, "k1", invoice.InvoiceParams{AmountFormatted: "1"})
		require.NoError(t, err)
		require.Equal(t, http.StatusNotFound, b.get("/dashboard/invoices/"+strconv.FormatInt(oi.ID, 10)).Status)
	})
}

func TestCSRF_ACrossOriginPostIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newSQLite(t))
	b := e.browser()
	b.signIn("owner@example.com")
	p := b.do("POST", "/dashboard/users/invite", url.Values{"email": {"evil@example.com"}, "role": {"owner"}},
		"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site")
	require.Equal(t, http.StatusForbidden, p.Status)
	require.Equal(t, "application/problem+json", p.Header.Get("Content-Type"))
	ls, err := e.st.ListDashboardLinks(ctx, e.merchant.ID, e.clock.Now())
	require.NoError(t, err)
	require.Empty(t, ls, "nothing was made")
	p = b.do("POST", "/dashboard/users/invite", url.Values{"email": {"ok@example.com"}, "role": {"viewer"}},
		"Origin", e.srv.URL, "Sec-Fetch-Site", "same-origin")
	require.Equal(t, http.StatusOK, p.Status)
}

func TestLedger_CSVAndJSONLines(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newSQLite(t))
	e.user("acc@example.com", store.RoleAccountant)
	b := e.browser()
	b.signIn("acc@example.com")
	res := b.get("/dashboard/ledger.csv?from=2026-01-01&to=2026-12-31")
	require.Equal(t, http.StatusOK, res.Status)
	rows, err := csv.NewReader(strings.NewReader(res.Body)).ReadAll()
	require.NoError(t, err)
	require.Equal(t, []string{"id", "kind", "at"}, rows[0][:3])
	require.Equal(t, http.StatusBadRequest, b.get("/dashboard/ledger.csv?from=yesterday").Status)
	jl := b.get("/dashboard/ledger.jsonl")
	require.Equal(t, http.StatusOK, jl.Status)
	require.Equal(t, "application/jsonl", jl.Header.Get("Content-Type"))
}

func TestAPIKeys_OwnerMakesAScopedKeyThatWorksThenRevokesIt(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, e *env) {
		e.user("dev@example.com", store.RoleDeveloper)
		dev := e.browser()
		dev.signIn("dev@example.com")
		require.Equal(t, http.StatusForbidden, dev.get("/dashboard/api-keys").Status, "API keys are the owner's")
		require.Equal(t, http.StatusForbidden, dev.post("/dashboard/api-keys", url.Values{"name": {"x"}, "scope": {"read"}}).Status)

		b := e.browser()
		b.signIn("owner@example.com")
		p := b.post("/dashboard/api-keys", url.Values{"name": {"shop"}, "scope": {"read", "invoices"}})
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		key := html.UnescapeString(regexp.MustCompile(`id="new-key" readonly value="([^"]+)"`).FindStringSubmatch(p.Body)[1])
		call := func() int {
			req, _ := http.NewRequest("GET", e.srv.URL+"/v1/invoices", nil)
			req.Header.Set("Authorization", "Bearer "+key)
			res, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			res.Body.Close()
			return res.StatusCode
		}
		require.Equal(t, http.StatusOK, call(), "the key works on the API")
		list := b.get("/dashboard/api-keys")
		require.NotContains(t, list.Body, key, "the secret is shown once")
		id := regexp.MustCompile(`/api-keys/(\d+)/revoke`).FindStringSubmatch(list.Body)[1]
		require.Equal(t, http.StatusSeeOther, b.post("/dashboard/api-keys/"+id+"/revoke", nil).Status)
		require.Equal(t, http.StatusUnauthorized, call(), "revoked at once")
		require.Equal(t, http.StatusBadRequest, b.post("/dashboard/api-keys", url.Values{"name": {"none"}}).Status, "scopes are required")
		es, err := e.st.ListAudit(ctx, store.AuditFilter{MerchantID: e.merchant.ID})
		require.NoError(t, err)
		require.Equal(t, "api_key.revoke", es[0].Action)
		require.Equal(t, "api_key.create", es[1].Action)
	})
}

func TestBranding_ADeveloperSetsColourAndLogo_AViewerCannot(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newSQLite(t))
	e.user("dev@example.com", store.RoleDeveloper)
	e.user("view@example.com", store.RoleViewer)
	var png bytes.Buffer
	img := image.NewRGBA(image.Rect(0, 0, 8, 8))
	require.NoError(t, pngenc.Encode(&png, img))
	upload := func(b *browser, color string, logo []byte) page {
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		require.NoError(t, mw.WriteField("accent_color", color))
		if logo != nil {
			h := textproto.MIMEHeader{}
			h.Set("Content-Disposition", `form-data; name="logo"; filename="logo.png"`)
			h.Set("Content-Type", "image/png")
			part, err := mw.CreatePart(h)
			require.NoError(t, err)
			_, _ = part.Write(logo)
		}
		require.NoError(t, mw.Close())
		return b.doBody("POST", "/dashboard/branding", mw.FormDataContentType(), body.Bytes())
	}
	v := e.browser()
	v.signIn("view@example.com")
	require.Equal(t, http.StatusOK, v.get("/dashboard/branding").Status, "a viewer sees it")
	require.Equal(t, http.StatusForbidden, upload(v, "#7b2ff7", png.Bytes()).Status, "and cannot change it")

	dev := e.browser()
	dev.signIn("dev@example.com")
	p := upload(dev, "#7B2FF7", png.Bytes())
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	b, err := e.api.Branding(ctx, e.merchant.ID)
	require.NoError(t, err)
	require.Equal(t, "#7b2ff7", b.AccentColor)
	require.Equal(t, png.Bytes(), b.Logo, "the logo's bytes, exactly")
	logo := dev.get("/dashboard/branding/logo")
	require.Equal(t, "image/png", logo.Header.Get("Content-Type"))
	require.Equal(t, png.String(), logo.Body)
	require.Contains(t, dev.get("/dashboard/branding").Body, `data-accent="#7b2ff7"`)

	// The API's checks apply: an SVG is refused, nothing changes.
	p = upload(dev, "#000000", []byte(`<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`))
	require.Equal(t, http.StatusBadRequest, p.Status)
	b, err = e.api.Branding(ctx, e.merchant.ID)
	require.NoError(t, err)
	require.Equal(t, "#7b2ff7", b.AccentColor)
}

func TestWebhookSecret_RotatedByADeveloper_ShownOnce_SignsFromNowOn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newSQLite(t))
	e.user("dev@example.com", store.RoleDeveloper)
	e.user("acc@example.com", store.RoleAccountant)
	acc := e.browser()
	acc.signIn("acc@example.com")
	require.Equal(t, http.StatusForbidden, acc.post("/dashboard/webhooks/secret/rotate", nil).Status)
	before, err := e.api.WebhookSecret(ctx, e.merchant.ID)
	require.NoError(t, err)
	dev := e.browser()
	dev.signIn("dev@example.com")
	p := dev.post("/dashboard/webhooks/secret/rotate", nil)
	require.Equal(t, http.StatusOK, p.Status)
	shown := regexp.MustCompile(`id="new-secret" readonly value="(whsec_[^"]+)"`).FindStringSubmatch(p.Body)
	require.NotNil(t, shown)
	after, err := e.api.WebhookSecret(ctx, e.merchant.ID)
	require.NoError(t, err)
	require.Equal(t, after, html.UnescapeString(shown[1]))
	require.NotEqual(t, before, after)
	require.NotContains(t, dev.get("/dashboard/webhooks").Body, after, "shown once")
}

func TestSettings_ProfileAndTolerance_ThroughTheAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newSQLite(t))
	b := e.browser()
	b.signIn("owner@example.com")
	p := b.post("/dashboard/settings/profile", url.Values{"name": {"Café"}, "webhook_url": {"https://shop.example/hook"},
		"tolerance_percent": {"0.5"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	m, err := e.api.Owner(ctx, e.merchant.ID)
	require.NoError(t, err)
	require.Equal(t, "Café", m.Merchant.Name)
	require.Equal(t, "https://shop.example/hook", m.Merchant.WebhookURL)
	require.Equal(t, "0.5", m.Merchant.Tolerance.Percent.String())
	p = b.post("/dashboard/settings/profile", url.Values{"name": {"Café"}, "webhook_url": {"ftp://x"}})
	require.Equal(t, http.StatusBadRequest, p.Status, "the API's own check")
	require.Contains(t, p.Body, "webhook_url")
}

func TestPayoutLimits_OwnerSetsThemInAssetUnits_TheAPIEnforcesThem(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newSQLite(t))
	e.user("acc@example.com", store.RoleAccountant)
	acc := e.browser()
	acc.signIn("acc@example.com")
	require.Equal(t, http.StatusForbidden, acc.post("/dashboard/settings/payout", url.Values{"threshold_ETH": {"1"}}).Status)

	b := e.browser()
	b.signIn("owner@example.com")
	p := b.post("/dashboard/settings/payout", url.Values{"threshold_ETH": {"0.5"}, "daily_ETH": {"2"},
		"allowlist": {"0x00000000000000000000000000000000000000bb\n0x00000000000000000000000000000000000000cc"}, "allowlist_enabled": {"on"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	ps, err := e.api.PayoutSettings(ctx, e.merchant.ID)
	require.NoError(t, err)
	require.Len(t, ps.Assets, 1)
	require.Equal(t, "500000000000000000", ps.Assets[0].ApprovalThreshold.String(), "base units, exactly")
	require.Equal(t, "2000000000000000000", ps.Assets[0].DailyLimit.String())
	require.Nil(t, ps.Assets[0].Reserve)
	require.True(t, ps.AllowlistEnabled)
	require.Len(t, ps.Allowlist, 2)
	page := b.get("/dashboard/settings")
	require.Contains(t, page.Body, `name="threshold_ETH" value="0.5"`)

	// The API applies them: a payout off the allowlist is refused, one
	// above the threshold waits for approval.
	form := acc.get("/dashboard/payouts")
	p = acc.post("/dashboard/payouts", url.Values{"key": {formKey(t, form.Body)}, "amount": {"1"}, "asset": {"ETH"},
		"destination": {"0x00000000000000000000000000000000000000dd"}})
	require.Equal(t, http.StatusUnprocessableEntity, p.Status)
	p = acc.post("/dashboard/payouts", url.Values{"key": {formKey(t, form.Body) + "2"}, "amount": {"1"}, "asset": {"ETH"},
		"destination": {"0x00000000000000000000000000000000000000bb"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.Contains(t, acc.get("/dashboard/payouts").Body, `data-status="AWAITING_APPROVAL"`)

	p = b.post("/dashboard/settings/payout", url.Values{"allowlist": {"not-an-address"}})
	require.Equal(t, http.StatusBadRequest, p.Status)
}

// The branding preview names the chain's own coin (issue #36: an evmd
// chain's coin is not "ETH").
func TestBranding_PreviewNamesTheChainsCoin(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, newSQLite(t), invoice.Config{Assets: []store.Asset{store.NativeAsset("TEST")}})
	b := e.browser()
	b.signIn("owner@example.com")
	body := b.get("/dashboard/branding").Body
	require.Contains(t, body, `<p class="pv-amount">0.5 TEST</p>`)
	require.NotContains(t, body, "ETH")
}

// With two chains, the overview's volumes name each asset with its chain:
// the two chains' native coins are two rows, never one sum (both are
// called ETH here), read from the roll-up per chain.
func TestOverview_TwoChains_VolumesPerChain(t *testing.T) {
	t.Parallel()
	for name, st := range map[string]func(*testing.T) store.Store{"postgres": func(t *testing.T) store.Store { return pgtest.New(t) },
		"sqlite": newSQLite} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnvWith(t, st(t), invoice.Config{Chains: []invoice.Chain{{ID: 9000}}})
			owner, err := e.api.Owner(ctx, e.merchant.ID)
			require.NoError(t, err)
			var ids []int64
			for i, c := range []struct {
				chain  uint64
				amount string
			}{{1337, "1"}, {9000, "2"}, {9000, "0.5"}} {
				oi, err := e.api.CreateInvoice(ctx, owner, fmt.Sprint("k", i), invoice.InvoiceParams{AmountFormatted: c.amount, ChainID: c.chain})
				require.NoError(t, err)
				ids = append(ids, oi.ID)
				inv, err := e.st.GetInvoice(ctx, oi.ID)
				require.NoError(t, err)
				require.Equal(t, c.chain, inv.ChainID)
				inv.PaidWei, inv.Status = inv.AmountWei, store.StatusPaid
				require.NoError(t, e.st.UpdateInvoice(ctx, &inv))
			}
			b := e.browser()
			b.signIn("owner@example.com")
			ov := b.get("/dashboard/")
			require.Equal(t, http.StatusOK, ov.Status)
			require.Regexp(t, `<th scope="row">ETH@1337</th><td class="num">1</td><td class="num">1</td>`, ov.Body)
			require.Regexp(t, `<th scope="row">ETH@9000</th><td class="num">2.5</td><td class="num">2.5</td>`, ov.Body)
			require.NotContains(t, ov.Body, `<th scope="row">ETH</th>`)
			// The invoice page names the invoice's chain.
			page := b.get("/dashboard/invoices/" + itoa(ids[1]))
			require.Equal(t, http.StatusOK, page.Status)
			require.Contains(t, page.Body, `<dd id="inv-chain">9000</dd>`)
		})
	}
}

// With two chains the new-invoice form offers each chain's assets as
// SYMBOL@chain, and the invoice is created on the chain chosen.
func TestNewInvoice_TwoChains_TheAssetChoiceNamesTheNetwork(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, newSQLite(t), invoice.Config{Chains: []invoice.Chain{{ID: 9000}}})
	b := e.browser()
	b.signIn("owner@example.com")
	form := b.get("/dashboard/invoices/new")
	require.Equal(t, http.StatusOK, form.Status)
	require.Contains(t, form.Body, `<option value="ETH@1337">ETH@1337</option><option value="ETH@9000">ETH@9000</option>`)
	p := b.post("/dashboard/invoices", url.Values{"key": {formKey(t, form.Body)}, "amount": {"2"}, "asset": {"ETH@9000"}})
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	id, err := strconv.ParseInt(regexp.MustCompile(`id="created-id">(\d+)<`).FindStringSubmatch(p.Body)[1], 10, 64)
	require.NoError(t, err)
	inv, err := e.st.GetInvoice(ctx, id)
	require.NoError(t, err)
	require.EqualValues(t, 9000, inv.ChainID)
	require.Equal(t, "2000000000000000000", inv.AmountWei.String())

	// A chain not served is refused with the API's reason, nothing created.
	form = b.get("/dashboard/invoices/new")
	p = b.post("/dashboard/invoices", url.Values{"key": {formKey(t, form.Body)}, "amount": {"2"}, "asset": {"ETH@42"}})
	require.Equal(t, http.StatusBadRequest, p.Status)
	require.Contains(t, p.Body, "chain")
}
