package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

func dashboardTests() []test {
	return []test{
		{"Dashboard_UserRoundTripAndEmailUnique", testDashboardUser},
		{"Dashboard_FailedSignInsCountConcurrentlyAndLock", testDashboardFailedSignIns},
		{"Dashboard_TOTPStepUsedOnce", testDashboardTOTPStep},
		{"Dashboard_SessionLifecycle", testDashboardSessions},
		{"Dashboard_Passkeys", testDashboardPasskeys},
		{"Dashboard_LinkUsedOnceAndNotAfterExpiry", testDashboardLinks},
		{"Dashboard_AuditLogIsAppendOnly", testDashboardAudit},
		{"Dashboard_PaymentLinks", testDashboardPaymentLinks},
		{"Dashboard_OutboundRecordsItsUsers", testDashboardOutboundUsers},
		{"Dashboard_SearchInvoices", testDashboardSearchInvoices},
		{"Dashboard_InvoiceVolumesFollowEveryInsertAndPayment", testDashboardVolumes},
		{"Dashboard_InvoiceVolumesFollowBulkInsertsAndUpdates", testDashboardVolumesInBulk},
		{"Dashboard_InvoiceVolumesPerChain_MovedInvoiceFollowsItsAsset", testDashboardVolumesPerChain},
	}
}

func newDashboardUser(t *testing.T, st store.Tx, merchantID int64, email, role string) store.DashboardUser {
	t.Helper()
	u := store.DashboardUser{MerchantID: merchantID, Email: email, Role: role, PasswordHash: "$argon2id$x",
		WebAuthnID: randBytes(32), CreatedAt: now(), UpdatedAt: now()}
	require.NoError(t, st.CreateDashboardUser(ctx, &u))
	require.NotZero(t, u.ID)
	return u
}

func testDashboardUser(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	u := newDashboardUser(t, st, m.ID, "Ana@Example.com", store.RoleOwner)
	got, err := st.GetDashboardUserByEmail(ctx, "ANA@example.COM")
	require.NoError(t, err)
	require.Equal(t, u.ID, got.ID)
	require.Equal(t, "ana@example.com", got.Email, "stored lower case")
	require.Equal(t, store.RoleOwner, got.Role)
	require.Equal(t, u.WebAuthnID, got.WebAuthnID)
	requireTime(t, now(), got.CreatedAt)

	dup := store.DashboardUser{MerchantID: m.ID, Email: "ana@example.com", Role: store.RoleViewer, WebAuthnID: randBytes(32),
		CreatedAt: now(), UpdatedAt: now()}
	require.ErrorIs(t, st.CreateDashboardUser(ctx, &dup), store.ErrConflict)
	bad := store.DashboardUser{MerchantID: m.ID, Email: "bob@example.com", Role: "root", WebAuthnID: randBytes(32),
		CreatedAt: now(), UpdatedAt: now()}
	require.Error(t, st.CreateDashboardUser(ctx, &bad), "an unknown role is refused by the database")
	none := store.DashboardUser{MerchantID: 987654, Email: "c@example.com", Role: store.RoleViewer, WebAuthnID: randBytes(32),
		CreatedAt: now(), UpdatedAt: now()}
	require.ErrorIs(t, st.CreateDashboardUser(ctx, &none), store.ErrNotFound)

	later := now().Add(time.Minute)
	got.Name, got.Role, got.TOTPSecret, got.TOTPEnabledAt, got.UpdatedAt = "Ana", store.RoleApprover, []byte{1, 2, 3}, &later, later
	require.NoError(t, st.UpdateDashboardUser(ctx, got))
	again, err := st.GetDashboardUser(ctx, u.ID)
	require.NoError(t, err)
	require.Equal(t, "Ana", again.Name)
	require.Equal(t, store.RoleApprover, again.Role)
	require.Equal(t, []byte{1, 2, 3}, again.TOTPSecret)
	requireTimePtr(t, &later, again.TOTPEnabledAt)

	other := newMerchant(t, st)
	newDashboardUser(t, st, other.ID, "zed@example.com", store.RoleViewer)
	v := newDashboardUser(t, st, m.ID, "vic@example.com", store.RoleViewer)
	us, err := st.ListDashboardUsers(ctx, m.ID)
	require.NoError(t, err)
	require.Len(t, us, 2)
	require.Equal(t, []int64{u.ID, v.ID}, []int64{us[0].ID, us[1].ID})
	_, err = st.GetDashboardUser(ctx, 987654)
	require.ErrorIs(t, err, store.ErrNotFound)
}

func testDashboardFailedSignIns(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	u := newDashboardUser(t, st, m.ID, "ana@example.com", store.RoleOwner)
	lock := now().Add(15 * time.Minute)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := st.RecordFailedSignIn(ctx, u.ID, 5, lock, now())
			require.NoError(t, err)
		}()
	}
	wg.Wait()
	got, err := st.GetDashboardUser(ctx, u.ID)
	require.NoError(t, err)
	require.Equal(t, 4, got.FailedSignIns, "every concurrent failure counted")
	require.Nil(t, got.LockedUntil, "not locked below the limit")
	got, err = st.RecordFailedSignIn(ctx, u.ID, 5, lock, now())
	require.NoError(t, err)
	require.Equal(t, 5, got.FailedSignIns)
	requireTimePtr(t, &lock, got.LockedUntil)
	_, err = st.RecordFailedSignIn(ctx, 987654, 5, lock, now())
	require.ErrorIs(t, err, store.ErrNotFound)
}

func testDashboardTOTPStep(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	u := newDashboardUser(t, st, m.ID, "ana@example.com", store.RoleOwner)
	ok, err := st.UseTOTPStep(ctx, u.ID, 100)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = st.UseTOTPStep(ctx, u.ID, 100)
	require.NoError(t, err)
	require.False(t, ok, "the same step twice")
	ok, err = st.UseTOTPStep(ctx, u.ID, 99)
	require.NoError(t, err)
	require.False(t, ok, "an earlier step")
	ok, err = st.UseTOTPStep(ctx, u.ID, 101)
	require.NoError(t, err)
	require.True(t, ok)
}

func testDashboardSessions(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	u := newDashboardUser(t, st, m.ID, "ana@example.com", store.RoleOwner)
	mk := func() store.DashboardSession {
		s := store.DashboardSession{TokenHash: randBytes(32), UserID: u.ID, MerchantID: m.ID, CreatedAt: now(),
			LastSeenAt: now(), ExpiresAt: now().Add(time.Hour), Pending: true, UserAgent: "test"}
		require.NoError(t, st.CreateDashboardSession(ctx, &s))
		return s
	}
	a, b, c := mk(), mk(), mk()
	got, err := st.GetDashboardSessionByHash(ctx, a.TokenHash)
	require.NoError(t, err)
	require.Equal(t, a.ID, got.ID)
	require.True(t, got.Pending)
	require.Nil(t, got.SecondFactorAt)
	_, err = st.GetDashboardSessionByHash(ctx, randBytes(32))
	require.ErrorIs(t, err, store.ErrNotFound)

	at := now().Add(time.Minute)
	require.NoError(t, st.PassSecondFactor(ctx, a.ID, at))
	require.NoError(t, st.TouchDashboardSession(ctx, a.ID, at, at.Add(time.Hour)))
	got, err = st.GetDashboardSessionByHash(ctx, a.TokenHash)
	require.NoError(t, err)
	require.False(t, got.Pending)
	requireTimePtr(t, &at, got.SecondFactorAt)
	requireTime(t, at.Add(time.Hour), got.ExpiresAt)

	require.NoError(t, st.RevokeDashboardSession(ctx, u.ID, b.ID, at))
	require.ErrorIs(t, st.RevokeDashboardSession(ctx, u.ID+1000, c.ID, at), store.ErrNotFound, "another user's session")
	ss, err := st.ListDashboardSessions(ctx, u.ID)
	require.NoError(t, err)
	require.Len(t, ss, 2)
	n, err := st.RevokeDashboardSessions(ctx, u.ID, a.ID, at)
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "every other session")
	got, err = st.GetDashboardSessionByHash(ctx, c.TokenHash)
	require.NoError(t, err)
	require.NotNil(t, got.RevokedAt)
	require.ErrorIs(t, st.PassSecondFactor(ctx, c.ID, at), store.ErrNotFound, "a revoked session passes nothing")
}

func testDashboardPasskeys(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	u := newDashboardUser(t, st, m.ID, "ana@example.com", store.RoleOwner)
	p := store.Passkey{UserID: u.ID, CredentialID: randBytes(16), Name: "laptop", Credential: []byte(`{"a":1}`), CreatedAt: now()}
	require.NoError(t, st.CreatePasskey(ctx, &p))
	dup := p
	require.ErrorIs(t, st.CreatePasskey(ctx, &dup), store.ErrConflict)
	got, err := st.GetPasskeyByCredentialID(ctx, p.CredentialID)
	require.NoError(t, err)
	require.Equal(t, p.ID, got.ID)
	require.Equal(t, "laptop", got.Name)
	at := now().Add(time.Minute)
	require.NoError(t, st.UpdatePasskeyUse(ctx, p.ID, []byte(`{"a":2}`), at))
	ps, err := st.ListPasskeys(ctx, u.ID)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	require.JSONEq(t, `{"a":2}`, string(ps[0].Credential))
	requireTimePtr(t, &at, ps[0].LastUsedAt)
	require.ErrorIs(t, st.DeletePasskey(ctx, u.ID+1000, p.ID), store.ErrNotFound, "another user's passkey")
	require.NoError(t, st.DeletePasskey(ctx, u.ID, p.ID))
	_, err = st.GetPasskeyByCredentialID(ctx, p.CredentialID)
	require.ErrorIs(t, err, store.ErrNotFound)
}

func testDashboardLinks(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	u := newDashboardUser(t, st, m.ID, "ana@example.com", store.RoleOwner)
	inv := store.DashboardLink{Kind: store.LinkInvitation, TokenHash: randBytes(32), MerchantID: m.ID, Email: "New@Example.com",
		Role: store.RoleViewer, CreatedBy: "ana@example.com", CreatedAt: now(), ExpiresAt: now().Add(time.Hour)}
	require.NoError(t, st.CreateDashboardLink(ctx, &inv))
	uid := u.ID
	reset := store.DashboardLink{Kind: store.LinkReset, TokenHash: randBytes(32), MerchantID: m.ID, UserID: &uid,
		CreatedAt: now(), ExpiresAt: now().Add(time.Hour)}
	require.NoError(t, st.CreateDashboardLink(ctx, &reset))
	bad := store.DashboardLink{Kind: store.LinkReset, TokenHash: randBytes(32), MerchantID: m.ID, CreatedAt: now(), ExpiresAt: now()}
	require.Error(t, st.CreateDashboardLink(ctx, &bad), "a reset link names its user")

	ls, err := st.ListDashboardLinks(ctx, m.ID, now())
	require.NoError(t, err)
	require.Len(t, ls, 2)

	_, err = st.UseDashboardLink(ctx, store.LinkReset, inv.TokenHash, now())
	require.ErrorIs(t, err, store.ErrNotFound, "the wrong kind")
	got, err := st.UseDashboardLink(ctx, store.LinkInvitation, inv.TokenHash, now())
	require.NoError(t, err)
	require.Equal(t, "new@example.com", got.Email)
	require.NotNil(t, got.UsedAt)
	_, err = st.UseDashboardLink(ctx, store.LinkInvitation, inv.TokenHash, now())
	require.ErrorIs(t, err, store.ErrNotFound, "used once")
	_, err = st.UseDashboardLink(ctx, store.LinkReset, reset.TokenHash, now().Add(time.Hour))
	require.ErrorIs(t, err, store.ErrNotFound, "expired")

	// Concurrent uses: exactly one wins.
	race := store.DashboardLink{Kind: store.LinkSignIn, TokenHash: randBytes(32), MerchantID: m.ID, UserID: &uid,
		CreatedAt: now(), ExpiresAt: now().Add(time.Hour)}
	require.NoError(t, st.CreateDashboardLink(ctx, &race))
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := st.UseDashboardLink(ctx, store.LinkSignIn, race.TokenHash, now()); err == nil {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Equal(t, 1, wins)
}

func testDashboardAudit(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	other := newMerchant(t, st)
	u := newDashboardUser(t, st, m.ID, "ana@example.com", store.RoleOwner)
	uid := u.ID
	var ids []int64
	for i, action := range []string{"sign_in", "refund.create", "refund.approve"} {
		e := store.AuditEntry{MerchantID: m.ID, UserID: &uid, Actor: u.Email, Action: action, Subject: "refund 1",
			At: now().Add(time.Duration(i) * time.Second)}
		require.NoError(t, st.AppendAudit(ctx, &e))
		ids = append(ids, e.ID)
	}
	require.NoError(t, st.AppendAudit(ctx, &store.AuditEntry{MerchantID: other.ID, Actor: "operator", Action: "sign_in", At: now()}))
	es, err := st.ListAudit(ctx, store.AuditFilter{MerchantID: m.ID})
	require.NoError(t, err)
	require.Len(t, es, 3)
	require.Equal(t, "refund.approve", es[0].Action, "newest first")
	require.Equal(t, uid, *es[0].UserID)
	es, err = st.ListAudit(ctx, store.AuditFilter{MerchantID: m.ID, BeforeID: ids[2], Limit: 1})
	require.NoError(t, err)
	require.Len(t, es, 1)
	require.Equal(t, "refund.create", es[0].Action)
	es, err = st.ListAudit(ctx, store.AuditFilter{MerchantID: m.ID, Action: "sign_in"})
	require.NoError(t, err)
	require.Len(t, es, 1)

	// Append-only, whatever the code does.
	require.Error(t, execRaw(t, st, `UPDATE audit_log SET actor = 'x'`), "UPDATE refused")
	require.Error(t, execRaw(t, st, `DELETE FROM audit_log`), "DELETE refused")
	es, err = st.ListAudit(ctx, store.AuditFilter{MerchantID: m.ID})
	require.NoError(t, err)
	require.Len(t, es, 3)
	require.Equal(t, u.Email, es[0].Actor)
}

func testDashboardPaymentLinks(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	amt := store.MustParseAmount("500000000000000000")
	l := store.PaymentLink{MerchantID: m.ID, Slug: "abc", Name: "Coffee", Amount: &amt, Active: true, CreatedAt: now(), UpdatedAt: now()}
	require.NoError(t, st.CreatePaymentLink(ctx, &l))
	lo, hi := store.MustParseAmount("1"), maxUint256()
	open := store.PaymentLink{MerchantID: m.ID, Slug: "def", Name: "Tip", Asset: "USDC", MinAmount: &lo, MaxAmount: &hi,
		Active: true, CreatedAt: now(), UpdatedAt: now()}
	require.NoError(t, st.CreatePaymentLink(ctx, &open))
	dup := store.PaymentLink{MerchantID: m.ID, Slug: "abc", Name: "x", CreatedAt: now(), UpdatedAt: now()}
	require.ErrorIs(t, st.CreatePaymentLink(ctx, &dup), store.ErrConflict)

	got, err := st.GetPaymentLinkBySlug(ctx, "def")
	require.NoError(t, err)
	require.Equal(t, open.ID, got.ID)
	require.Equal(t, hi.String(), got.MaxAmount.String(), "uint256 exactly")
	require.Nil(t, got.Amount)
	ls, err := st.ListPaymentLinks(ctx, m.ID)
	require.NoError(t, err)
	require.Len(t, ls, 2)

	require.NoError(t, st.SetPaymentLinkActive(ctx, m.ID, l.ID, false, now()))
	require.ErrorIs(t, st.SetPaymentLinkActive(ctx, m.ID+1000, l.ID, true, now()), store.ErrNotFound)
	got, err = st.GetPaymentLink(ctx, l.ID)
	require.NoError(t, err)
	require.False(t, got.Active)
	require.NotNil(t, got.DisabledAt)

	inv1, inv2 := newInvoice(t, st, m.ID), newInvoice(t, st, m.ID)
	require.NoError(t, st.AddPaymentLinkInvoice(ctx, l.ID, inv1.ID))
	require.NoError(t, st.AddPaymentLinkInvoice(ctx, l.ID, inv2.ID))
	require.ErrorIs(t, st.AddPaymentLinkInvoice(ctx, open.ID, inv2.ID), store.ErrConflict, "an invoice belongs to one link")
	ids, err := st.ListPaymentLinkInvoices(ctx, l.ID, 10)
	require.NoError(t, err)
	require.Equal(t, []int64{inv2.ID, inv1.ID}, ids)
}

func testDashboardOutboundUsers(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	inv := newInvoice(t, st, m.ID)
	o := newOutbound(t, st, m, func(o *store.Outbound) {
		o.Kind, o.InvoiceID, o.Reason = store.OutboundRefund, &inv.ID, store.RefundOverpayment
		o.CreatedByUser = 7
		o.Status = store.OutboundAwaitingApproval
	})
	got, err := st.GetOutbound(ctx, o.ID)
	require.NoError(t, err)
	require.EqualValues(t, 7, got.CreatedByUser)
	require.Nil(t, got.ApprovedByUser)
	nine := int64(9)
	got.ApprovedByUser, got.Status = &nine, store.OutboundQueued
	require.NoError(t, st.UpdateOutbound(ctx, &got))
	again, err := st.GetOutbound(ctx, o.ID)
	require.NoError(t, err)
	require.EqualValues(t, 7, again.CreatedByUser)
	require.Equal(t, &nine, again.ApprovedByUser)
}

// execRaw runs a statement on the store's database handle, around its
// methods: what the database itself allows.
func execRaw(t *testing.T, st store.Store, q string) error {
	t.Helper()
	db, ok := st.(interface{ DB() *sqlx.DB })
	require.True(t, ok, "the store exposes its database handle")
	_, err := db.DB().ExecContext(ctx, q)
	return err
}

func testDashboardSearchInvoices(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	other := newMerchant(t, st)
	native := newInvoice(t, st, m.ID, func(inv *store.Invoice) { inv.OrderID = "A-1" })
	token := newInvoice(t, st, m.ID, func(inv *store.Invoice) { inv.SetAsset(usdc()); inv.OrderID = "A-2" })
	paid := newInvoice(t, st, m.ID, func(inv *store.Invoice) { inv.Status = store.StatusPaid })
	foreign := newInvoice(t, st, other.ID, func(inv *store.Invoice) { inv.OrderID = "A-1" })
	p := newPayment(t, st, paid.ID, 10, 5)
	newPayment(t, st, foreign.ID, 11, 5)

	ids := func(f store.InvoiceSearch) []int64 {
		f.MerchantID = m.ID
		invs, err := st.SearchInvoices(ctx, f)
		require.NoError(t, err)
		var out []int64
		for _, inv := range invs {
			out = append(out, inv.ID)
		}
		return out
	}
	require.Equal(t, []int64{paid.ID, token.ID, native.ID}, ids(store.InvoiceSearch{}), "newest first, the merchant's only")
	require.Equal(t, []int64{native.ID}, ids(store.InvoiceSearch{OrderID: "A-1"}))
	require.Equal(t, []int64{token.ID}, ids(store.InvoiceSearch{AssetSet: true, Token: usdc().Address}))
	require.Equal(t, []int64{paid.ID, native.ID}, ids(store.InvoiceSearch{AssetSet: true}), "the native coin")
	require.Equal(t, []int64{paid.ID}, ids(store.InvoiceSearch{TxHash: &p.TxHash}))
	require.Empty(t, ids(store.InvoiceSearch{TxHash: ptr(randHash())}))
	require.Equal(t, []int64{token.ID}, ids(store.InvoiceSearch{DepositAddress: &token.DepositAddress}))
	require.Empty(t, ids(store.InvoiceSearch{DepositAddress: &foreign.DepositAddress}), "another merchant's address")
	require.Equal(t, []int64{native.ID}, ids(store.InvoiceSearch{ID: native.ID, OrderID: "nothing"}))
	require.Empty(t, ids(store.InvoiceSearch{ID: foreign.ID}), "another merchant's id")
	require.Equal(t, []int64{paid.ID}, ids(store.InvoiceSearch{InvoiceFilter: store.InvoiceFilter{Statuses: []string{store.StatusPaid}}}))
	require.Equal(t, []int64{paid.ID, token.ID}, ids(store.InvoiceSearch{InvoiceFilter: store.InvoiceFilter{
		Statuses: []string{store.StatusPending, store.StatusPaid}, Limit: 2}}), "two statuses, merged newest first")
	require.Equal(t, []int64{token.ID}, ids(store.InvoiceSearch{AssetSet: true, Token: usdc().Address, InvoiceFilter: store.InvoiceFilter{
		Statuses: []string{store.StatusPending, store.StatusPaid}}}), "with the other filters in each arm")
	require.Equal(t, []int64{native.ID}, ids(store.InvoiceSearch{InvoiceFilter: store.InvoiceFilter{BeforeID: token.ID}}))
	require.Equal(t, []int64{paid.ID}, ids(store.InvoiceSearch{InvoiceFilter: store.InvoiceFilter{Limit: 1}}))
}

// volumeRow is a DailyVolume as the volume tests compare it.
type volumeRow struct {
	day      string
	token    bool
	invoices int64
	paid     string
}

// chainVolumeRow is a DailyVolume with its chain, for comparing.
type chainVolumeRow struct {
	chain    uint64
	token    string // "" for the native coin
	invoices int64
	paid     string
}

// testDashboardVolumesPerChain: the native coins of two chains are two
// assets, and an invoice moved to another chain (settlement's
// MoveInvoice, a payment on another chain it quoted) counts, with what
// it was paid, under the chain and asset it moved to.
func testDashboardVolumesPerChain(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	day := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	at := func(inv *store.Invoice) { inv.CreatedAt = day }
	onChain := func(id uint64) func(*store.Invoice) { return func(inv *store.Invoice) { inv.ChainID = id } }
	a := newInvoice(t, st, m.ID, at)
	b := newInvoice(t, st, m.ID, at, onChain(9000))
	c := newInvoice(t, st, m.ID, at, func(inv *store.Invoice) { inv.SetAsset(usdc()) })
	usdcThere := common.HexToAddress("0x00000000000000000000000000000000000090c0")

	pay := func(inv store.Invoice, amount store.Amount) { t.Helper(); setPaid(t, st, inv, amount) }
	pay(a, store.NewAmount(5))
	pay(b, store.NewAmount(7))
	pay(c, store.NewAmount(1)) // a first payment on its own chain…
	// …then it moves to chain 9000's USDC (another address there), where
	// the rest is paid: it is chain 9000's now, with all it was paid.
	require.NoError(t, st.InTx(ctx, func(tx store.Tx) error {
		got, err := tx.GetInvoice(ctx, c.ID)
		if err != nil {
			return err
		}
		got.ChainID, got.TokenAddress = 9000, &usdcThere
		return tx.MoveInvoice(ctx, &got)
	}))
	pay(c, store.NewAmount(11))

	vs, err := st.InvoiceVolumes(ctx, m.ID, day.Truncate(24*time.Hour), day.AddDate(0, 0, 1))
	require.NoError(t, err)
	var got []chainVolumeRow
	for _, v := range vs {
		require.Equal(t, "2026-11-22", v.Day.Format(time.DateOnly))
		r := chainVolumeRow{chain: v.ChainID, invoices: v.Invoices, paid: v.Paid.String()}
		if v.Token != nil {
			r.token = v.Token.Hex()
		}
		got = append(got, r)
	}
	require.Equal(t, []chainVolumeRow{
		{1337, "", 1, "5"},
		{9000, "", 1, "7"},
		{9000, usdcThere.Hex(), 1, "11"},
	}, got, "per chain; nothing left under the asset the invoice moved from")
}

// setPaid writes amount as inv's paid_wei, as settlement's payments do.
func setPaid(t *testing.T, st store.Store, inv store.Invoice, amount store.Amount) {
	t.Helper()
	got, err := st.GetInvoice(ctx, inv.ID)
	require.NoError(t, err)
	got.PaidWei = amount
	require.NoError(t, st.UpdateInvoice(ctx, &got))
}

func volumeRows(vs []store.DailyVolume) []volumeRow {
	var out []volumeRow
	for _, v := range vs {
		out = append(out, volumeRow{v.Day.Format(time.DateOnly), v.Token != nil, v.Invoices, v.Paid.String()})
	}
	return out
}

func testDashboardVolumes(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	other := newMerchant(t, st)
	day1 := time.Date(2026, 11, 20, 23, 59, 0, 0, time.UTC)
	day2 := time.Date(2026, 11, 21, 0, 0, 1, 0, time.UTC)
	at := func(t time.Time) func(*store.Invoice) { return func(inv *store.Invoice) { inv.CreatedAt = t } }
	a := newInvoice(t, st, m.ID, at(day1))
	newInvoice(t, st, m.ID, at(day1))
	b := newInvoice(t, st, m.ID, at(day2))
	c := newInvoice(t, st, m.ID, at(day2), func(inv *store.Invoice) { inv.SetAsset(usdc()) })
	newInvoice(t, st, other.ID, at(day2))
	newInvoice(t, st, m.ID, at(day2.AddDate(0, 0, 5))) // outside the range

	pay := func(inv store.Invoice, amount store.Amount) { t.Helper(); setPaid(t, st, inv, amount) }
	huge := maxUint256()
	half, _ := huge.Sub(store.NewAmount(1))
	pay(a, store.MustParseAmount("1500000000000000000"))
	pay(b, half)
	pay(b, huge) // a second payment: only the difference is added
	pay(c, store.NewAmount(12500000))
	pay(a, store.MustParseAmount("1000000000000000000")) // a reorg took half a coin back

	vs, err := st.InvoiceVolumes(ctx, m.ID, day1.Truncate(24*time.Hour), day2.AddDate(0, 0, 1))
	require.NoError(t, err)
	require.Equal(t, []volumeRow{
		{"2026-11-20", false, 2, "1000000000000000000"},
		{"2026-11-21", false, 1, huge.String()},
		{"2026-11-21", true, 1, "12500000"},
	}, volumeRows(vs), "exact to the wei, per day and asset, this merchant's only")
	require.Equal(t, usdc().Address.Hex(), vs[2].Token.Hex())
}

// testDashboardVolumesInBulk is testDashboardVolumes for many rows in one
// statement, as settlement writes them (PostgreSQL's roll-up sums a
// statement's rows per day and asset, migration 0194): every row is
// counted once, to the wei, under its own day and asset.
func testDashboardVolumesInBulk(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	day1 := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	day2 := day1.AddDate(0, 0, 1)
	huge := maxUint256()
	var invs []*store.Invoice
	for i, c := range []struct {
		day   time.Time
		token bool
		paid  store.Amount
	}{
		{day1, false, store.Amount{}}, {day1, false, store.NewAmount(7)}, {day1, true, store.Amount{}},
		{day2, false, store.Amount{}}, {day2, true, store.Amount{}}, {day2, true, store.Amount{}},
	} {
		idx, err := st.NextDerivationIndex(ctx)
		require.NoError(t, err)
		inv := &store.Invoice{MerchantID: m.ID, Status: store.StatusPending, AmountWei: store.NewAmount(1), ChainID: 1337,
			DepositAddress: randAddr(), DerivationIndex: idx, PaymentURI: fmt.Sprintf("ethereum:0x0@1337?value=%d", i),
			LookupTokenHash: randBytes(32), ExpiresAt: c.day.Add(time.Hour), CreatedAt: c.day, UpdatedAt: c.day,
			SweepStatus: store.SweepNone, PaidWei: c.paid}
		if c.token {
			inv.SetAsset(usdc())
		}
		invs = append(invs, inv)
	}
	require.NoError(t, st.CreateInvoices(ctx, invs))

	// One statement pays five of them: two on the same day and asset, one
	// to the top of uint256, one back down (a reorg), one not at all.
	var updated []*store.Invoice
	for i, paid := range []store.Amount{store.NewAmount(10), store.NewAmount(3), store.NewAmount(20), huge, store.NewAmount(0)} {
		got, err := st.GetInvoice(ctx, invs[i].ID)
		require.NoError(t, err)
		got.PaidWei = paid
		got.Status = store.StatusPaid
		updated = append(updated, &got)
	}
	require.NoError(t, st.InTx(ctx, func(tx store.Tx) error { return tx.UpdateInvoiceStates(ctx, updated) }))

	vs, err := st.InvoiceVolumes(ctx, m.ID, day1.Truncate(24*time.Hour), day2.AddDate(0, 0, 1))
	require.NoError(t, err)
	require.Equal(t, []volumeRow{
		{"2026-11-20", false, 2, "13"}, // 10, and 7 at creation → 3
		{"2026-11-20", true, 1, "20"},
		{"2026-11-21", false, 1, huge.String()},
		{"2026-11-21", true, 2, "0"},
	}, volumeRows(vs), "every row once, exact to the wei, per day and asset")
}
