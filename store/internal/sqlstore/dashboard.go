package sqlstore

import (
	"context"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/evmpay/evmpay/store"
)

// The merchant dashboard's records (store.DashboardStore).

const dashboardUserColumns = `id, merchant_id, email, name, role, password_hash, totp_secret, totp_enabled_at,
	totp_last_step, failed_sign_ins, locked_until, webauthn_id, disabled_at, created_at, updated_at`

// CreateDashboardUser implements store.DashboardStore.
func (s *Store) CreateDashboardUser(ctx context.Context, u *store.DashboardUser) error {
	u.Email = strings.ToLower(u.Email)
	return s.withTx(ctx, func(t *Store) error {
		var id int64
		if err := t.get(ctx, &id, `SELECT id FROM merchants WHERE id = ?`, u.MerchantID); err != nil {
			return err
		}
		return t.namedGet(ctx, &u.ID, `INSERT INTO dashboard_users (merchant_id, email, name, role, password_hash,
				totp_secret, totp_enabled_at, totp_last_step, failed_sign_ins, locked_until, webauthn_id, disabled_at,
				created_at, updated_at)
			VALUES (:merchant_id, :email, :name, :role, :password_hash, :totp_secret, :totp_enabled_at,
				:totp_last_step, :failed_sign_ins, :locked_until, :webauthn_id, :disabled_at, :created_at, :updated_at)
			RETURNING id`, u)
	})
}

// GetDashboardUser implements store.DashboardStore.
func (s *Store) GetDashboardUser(ctx context.Context, id int64) (store.DashboardUser, error) {
	var u store.DashboardUser
	err := s.get(ctx, &u, `SELECT `+dashboardUserColumns+` FROM dashboard_users WHERE id = ?`, id)
	return u, err
}

// GetDashboardUserByEmail implements store.DashboardStore.
func (s *Store) GetDashboardUserByEmail(ctx context.Context, email string) (store.DashboardUser, error) {
	var u store.DashboardUser
	err := s.get(ctx, &u, `SELECT `+dashboardUserColumns+` FROM dashboard_users WHERE email = ?`, strings.ToLower(email))
	return u, err
}

// ListDashboardUsers implements store.DashboardStore.
func (s *Store) ListDashboardUsers(ctx context.Context, merchantID int64) ([]store.DashboardUser, error) {
	var us []store.DashboardUser
	err := s.sel(ctx, &us, `SELECT `+dashboardUserColumns+` FROM dashboard_users WHERE merchant_id = ? ORDER BY id`, merchantID)
	return us, err
}

// UpdateDashboardUser implements store.DashboardStore.
func (s *Store) UpdateDashboardUser(ctx context.Context, u store.DashboardUser) error {
	res, err := s.namedExec(ctx, `UPDATE dashboard_users SET name = :name, role = :role, password_hash = :password_hash,
			totp_secret = :totp_secret, totp_enabled_at = :totp_enabled_at, totp_last_step = :totp_last_step,
			failed_sign_ins = :failed_sign_ins, locked_until = :locked_until, disabled_at = :disabled_at,
			updated_at = :updated_at
		WHERE id = :id`, u)
	return affectedOne(res, err)
}

// RecordFailedSignIn implements store.DashboardStore.
func (s *Store) RecordFailedSignIn(ctx context.Context, userID int64, max int, lockUntil, at time.Time) (store.DashboardUser, error) {
	var u store.DashboardUser
	err := s.withTx(ctx, func(t *Store) error {
		res, err := t.exec(ctx, `UPDATE dashboard_users SET failed_sign_ins = failed_sign_ins + 1,
				locked_until = CASE WHEN failed_sign_ins + 1 >= ? THEN ? ELSE locked_until END, updated_at = ?
			WHERE id = ?`, max, lockUntil, at, userID)
		if err := affectedOne(res, err); err != nil {
			return err
		}
		return t.get(ctx, &u, `SELECT `+dashboardUserColumns+` FROM dashboard_users WHERE id = ?`, userID)
	})
	return u, err
}

// UseTOTPStep implements store.DashboardStore.
func (s *Store) UseTOTPStep(ctx context.Context, userID, step int64) (bool, error) {
	res, err := s.exec(ctx, `UPDATE dashboard_users SET totp_last_step = ? WHERE id = ? AND totp_last_step < ?`,
		step, userID, step)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

const dashboardSessionColumns = `id, token_hash, user_id, merchant_id, created_at, last_seen_at, expires_at,
	second_factor_at, pending, user_agent, revoked_at`

// CreateDashboardSession implements store.DashboardStore.
func (s *Store) CreateDashboardSession(ctx context.Context, ds *store.DashboardSession) error {
	return s.namedGet(ctx, &ds.ID, `INSERT INTO dashboard_sessions (token_hash, user_id, merchant_id, created_at,
			last_seen_at, expires_at, second_factor_at, pending, user_agent, revoked_at)
		VALUES (:token_hash, :user_id, :merchant_id, :created_at, :last_seen_at, :expires_at, :second_factor_at,
			:pending, :user_agent, :revoked_at)
		RETURNING id`, ds)
}

// GetDashboardSessionByHash implements store.DashboardStore.
func (s *Store) GetDashboardSessionByHash(ctx context.Context, hash []byte) (store.DashboardSession, error) {
	var ds store.DashboardSession
	err := s.getPrepared(ctx, &ds, `SELECT `+dashboardSessionColumns+` FROM dashboard_sessions WHERE token_hash = ?`, hash)
	return ds, err
}

// TouchDashboardSession implements store.DashboardStore.
func (s *Store) TouchDashboardSession(ctx context.Context, id int64, seen, expires time.Time) error {
	res, err := s.exec(ctx, `UPDATE dashboard_sessions SET last_seen_at = ?, expires_at = ? WHERE id = ?`, seen, expires, id)
	return affectedOne(res, err)
}

// PassSecondFactor implements store.DashboardStore.
func (s *Store) PassSecondFactor(ctx context.Context, id int64, at time.Time) error {
	res, err := s.exec(ctx, `UPDATE dashboard_sessions SET second_factor_at = ?, pending = ? WHERE id = ? AND revoked_at IS NULL`,
		at, false, id)
	return affectedOne(res, err)
}

// ListDashboardSessions implements store.DashboardStore.
func (s *Store) ListDashboardSessions(ctx context.Context, userID int64) ([]store.DashboardSession, error) {
	var ds []store.DashboardSession
	err := s.sel(ctx, &ds, `SELECT `+dashboardSessionColumns+` FROM dashboard_sessions
		WHERE user_id = ? AND revoked_at IS NULL ORDER BY id DESC LIMIT 100`, userID)
	return ds, err
}

// RevokeDashboardSession implements store.DashboardStore.
func (s *Store) RevokeDashboardSession(ctx context.Context, userID, id int64, at time.Time) error {
	res, err := s.exec(ctx, `UPDATE dashboard_sessions SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ? AND user_id = ?`,
		at, id, userID)
	return affectedOne(res, err)
}

// RevokeDashboardSessions implements store.DashboardStore.
func (s *Store) RevokeDashboardSessions(ctx context.Context, userID, except int64, at time.Time) (int64, error) {
	res, err := s.exec(ctx, `UPDATE dashboard_sessions SET revoked_at = ?
		WHERE user_id = ? AND id <> ? AND revoked_at IS NULL`, at, userID, except)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

const passkeyColumns = `id, user_id, credential_id, name, credential, created_at, last_used_at`

// CreatePasskey implements store.DashboardStore.
func (s *Store) CreatePasskey(ctx context.Context, p *store.Passkey) error {
	return s.namedGet(ctx, &p.ID, `INSERT INTO dashboard_passkeys (user_id, credential_id, name, credential, created_at,
			last_used_at)
		VALUES (:user_id, :credential_id, :name, :credential, :created_at, :last_used_at)
		RETURNING id`, p)
}

// ListPasskeys implements store.DashboardStore.
func (s *Store) ListPasskeys(ctx context.Context, userID int64) ([]store.Passkey, error) {
	var ps []store.Passkey
	err := s.sel(ctx, &ps, `SELECT `+passkeyColumns+` FROM dashboard_passkeys WHERE user_id = ? ORDER BY id`, userID)
	return ps, err
}

// GetPasskeyByCredentialID implements store.DashboardStore.
func (s *Store) GetPasskeyByCredentialID(ctx context.Context, credentialID []byte) (store.Passkey, error) {
	var p store.Passkey
	err := s.get(ctx, &p, `SELECT `+passkeyColumns+` FROM dashboard_passkeys WHERE credential_id = ?`, credentialID)
	return p, err
}

// UpdatePasskeyUse implements store.DashboardStore.
func (s *Store) UpdatePasskeyUse(ctx context.Context, id int64, credential []byte, at time.Time) error {
	res, err := s.exec(ctx, `UPDATE dashboard_passkeys SET credential = ?, last_used_at = ? WHERE id = ?`, credential, at, id)
	return affectedOne(res, err)
}

// DeletePasskey implements store.DashboardStore.
func (s *Store) DeletePasskey(ctx context.Context, userID, id int64) error {
	res, err := s.exec(ctx, `DELETE FROM dashboard_passkeys WHERE id = ? AND user_id = ?`, id, userID)
	return affectedOne(res, err)
}

const dashboardLinkColumns = `id, kind, token_hash, merchant_id, user_id, email, role, created_by, created_at,
	expires_at, used_at`

// CreateDashboardLink implements store.DashboardStore.
func (s *Store) CreateDashboardLink(ctx context.Context, l *store.DashboardLink) error {
	l.Email = strings.ToLower(l.Email)
	return s.namedGet(ctx, &l.ID, `INSERT INTO dashboard_links (kind, token_hash, merchant_id, user_id, email, role,
			created_by, created_at, expires_at, used_at)
		VALUES (:kind, :token_hash, :merchant_id, :user_id, :email, :role, :created_by, :created_at, :expires_at,
			:used_at)
		RETURNING id`, l)
}

// UseDashboardLink implements store.DashboardStore.
func (s *Store) UseDashboardLink(ctx context.Context, kind string, hash []byte, at time.Time) (store.DashboardLink, error) {
	var l store.DashboardLink
	err := s.withTx(ctx, func(t *Store) error {
		res, err := t.exec(ctx, `UPDATE dashboard_links SET used_at = ?
			WHERE kind = ? AND token_hash = ? AND used_at IS NULL AND expires_at > ?`, at, kind, hash, at)
		if err := affectedOne(res, err); err != nil {
			return err
		}
		return t.get(ctx, &l, `SELECT `+dashboardLinkColumns+` FROM dashboard_links WHERE token_hash = ?`, hash)
	})
	return l, err
}

// ListDashboardLinks implements store.DashboardStore.
func (s *Store) ListDashboardLinks(ctx context.Context, merchantID int64, at time.Time) ([]store.DashboardLink, error) {
	var ls []store.DashboardLink
	err := s.sel(ctx, &ls, `SELECT `+dashboardLinkColumns+` FROM dashboard_links
		WHERE merchant_id = ? AND used_at IS NULL AND expires_at > ? ORDER BY id DESC LIMIT 100`, merchantID, at)
	return ls, err
}

const auditColumns = `id, merchant_id, user_id, actor, action, subject, detail, at`

// AppendAudit implements store.DashboardStore.
func (s *Store) AppendAudit(ctx context.Context, e *store.AuditEntry) error {
	return s.namedGet(ctx, &e.ID, `INSERT INTO audit_log (merchant_id, user_id, actor, action, subject, detail, at)
		VALUES (:merchant_id, :user_id, :actor, :action, :subject, :detail, :at)
		RETURNING id`, e)
}

// ListAudit implements store.DashboardStore.
func (s *Store) ListAudit(ctx context.Context, f store.AuditFilter) ([]store.AuditEntry, error) {
	q := `SELECT ` + auditColumns + ` FROM audit_log WHERE merchant_id = ?`
	args := []any{f.MerchantID}
	if f.BeforeID > 0 {
		q += ` AND id < ?`
		args = append(args, f.BeforeID)
	}
	if f.Action != "" {
		q += ` AND action = ?`
		args = append(args, f.Action)
	}
	q += ` ORDER BY id DESC LIMIT ?`
	args = append(args, limit(f.Limit, 50, 1000))
	var es []store.AuditEntry
	err := s.sel(ctx, &es, q, args...)
	return es, err
}

const paymentLinkColumns = `id, merchant_id, slug, name, description, asset, amount, min_amount, max_amount,
	price_amount, price_currency, active, created_at, updated_at, disabled_at`

// CreatePaymentLink implements store.DashboardStore.
func (s *Store) CreatePaymentLink(ctx context.Context, l *store.PaymentLink) error {
	return s.namedGet(ctx, &l.ID, `INSERT INTO payment_links (merchant_id, slug, name, description, asset, amount,
			min_amount, max_amount, price_amount, price_currency, active, created_at, updated_at, disabled_at)
		VALUES (:merchant_id, :slug, :name, :description, :asset, :amount, :min_amount, :max_amount, :price_amount,
			:price_currency, :active, :created_at, :updated_at, :disabled_at)
		RETURNING id`, l)
}

// GetPaymentLink implements store.DashboardStore.
func (s *Store) GetPaymentLink(ctx context.Context, id int64) (store.PaymentLink, error) {
	var l store.PaymentLink
	err := s.get(ctx, &l, `SELECT `+paymentLinkColumns+` FROM payment_links WHERE id = ?`, id)
	return l, err
}

// GetPaymentLinkBySlug implements store.DashboardStore.
func (s *Store) GetPaymentLinkBySlug(ctx context.Context, slug string) (store.PaymentLink, error) {
	var l store.PaymentLink
	err := s.get(ctx, &l, `SELECT `+paymentLinkColumns+` FROM payment_links WHERE slug = ?`, slug)
	return l, err
}

// ListPaymentLinks implements store.DashboardStore.
func (s *Store) ListPaymentLinks(ctx context.Context, merchantID int64) ([]store.PaymentLink, error) {
	var ls []store.PaymentLink
	err := s.sel(ctx, &ls, `SELECT `+paymentLinkColumns+` FROM payment_links WHERE merchant_id = ? ORDER BY id DESC LIMIT 500`,
		merchantID)
	return ls, err
}

// SetPaymentLinkActive implements store.DashboardStore.
func (s *Store) SetPaymentLinkActive(ctx context.Context, merchantID, id int64, active bool, at time.Time) error {
	var disabled *time.Time
	if !active {
		disabled = &at
	}
	res, err := s.exec(ctx, `UPDATE payment_links SET active = ?, disabled_at = ?, updated_at = ? WHERE id = ? AND merchant_id = ?`,
		active, disabled, at, id, merchantID)
	return affectedOne(res, err)
}

// AddPaymentLinkInvoice implements store.DashboardStore.
func (s *Store) AddPaymentLinkInvoice(ctx context.Context, linkID, invoiceID int64) error {
	_, err := s.exec(ctx, `INSERT INTO payment_link_invoices (link_id, invoice_id) VALUES (?, ?)`, linkID, invoiceID)
	return err
}

// ListPaymentLinkInvoices implements store.DashboardStore.
func (s *Store) ListPaymentLinkInvoices(ctx context.Context, linkID int64, n int) ([]int64, error) {
	var ids []int64
	err := s.sel(ctx, &ids, `SELECT invoice_id FROM payment_link_invoices WHERE link_id = ? ORDER BY invoice_id DESC LIMIT ?`,
		linkID, limit(n, 100, 10000))
	return ids, err
}

// affectedOne turns an UPDATE or DELETE that touched no row into
// store.ErrNotFound.
func affectedOne(res interface{ RowsAffected() (int64, error) }, err error) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return store.ErrNotFound
	}
	return nil
}

// SearchInvoices implements store.DashboardStore.
func (s *Store) SearchInvoices(ctx context.Context, f store.InvoiceSearch) ([]store.Invoice, error) {
	where := []string{"i.merchant_id = ?"}
	args := []any{f.MerchantID}
	from := "invoices i"
	switch {
	case f.TxHash != nil:
		// Through the payments' unique (tx_hash, log_index) index.
		where = append(where, "i.id IN (SELECT p.invoice_id FROM payments p WHERE p.tx_hash = ?)")
		args = append(args, *f.TxHash)
	case f.DepositAddress != nil:
		where = append(where, "i.deposit_address = ?")
		args = append(args, *f.DepositAddress)
	case f.ID != 0 && f.OrderID != "":
		where = append(where, "(i.id = ? OR i.order_id = ?)")
		args = append(args, f.ID, f.OrderID)
	case f.ID != 0:
		where = append(where, "i.id = ?")
		args = append(args, f.ID)
	case f.OrderID != "":
		where = append(where, "i.order_id = ?")
		args = append(args, f.OrderID)
	}
	if f.AssetSet {
		if f.Token == nil {
			where = append(where, "i.token_address IS NULL")
		} else {
			where = append(where, "i.token_address = ?")
			args = append(args, *f.Token)
		}
	}
	statuses := slices.Compact(slices.Sorted(slices.Values(f.Statuses)))
	if !f.CreatedAfter.IsZero() {
		where = append(where, "i.created_at >= ?")
		args = append(args, f.CreatedAfter)
	}
	if !f.CreatedBefore.IsZero() {
		where = append(where, "i.created_at < ?")
		args = append(args, f.CreatedBefore)
	}
	if f.BeforeID > 0 {
		where = append(where, "i.id < ?")
		args = append(args, f.BeforeID)
	}
	n := limit(f.Limit, 100, 1000)
	cols := prefixColumns("i.", invoiceColumns)
	one := func(status string) (string, []any) {
		w, a := where, slices.Clone(args)
		if status != "" {
			w = append(slices.Clone(w), "i.status = ?")
			a = append(a, status)
		}
		return "SELECT " + cols + " FROM " + from + " WHERE " + strings.Join(w, " AND ") + " ORDER BY i.id DESC LIMIT ?", append(a, n)
	}
	var (
		q  string
		qa []any
	)
	switch len(statuses) {
	case 0:
		q, qa = one("")
	case 1:
		q, qa = one(statuses[0])
	default:
		// One index range per status (merchant_id, status, id), merged: a
		// rare status is not looked for among every invoice of the others.
		arms := make([]string, len(statuses))
		for i, st := range statuses {
			aq, a := one(st)
			arms[i] = "SELECT * FROM (" + aq + ") s" + strconv.Itoa(i)
			qa = append(qa, a...)
		}
		q = "SELECT * FROM (" + strings.Join(arms, " UNION ALL ") + ") u ORDER BY id DESC LIMIT ?"
		qa = append(qa, n)
	}
	var invs []store.Invoice
	err := s.sel(ctx, &invs, q, qa...)
	return invs, err
}

// prefixColumns qualifies a column list with a table alias.
func prefixColumns(alias, cols string) string {
	parts := strings.Split(cols, ",")
	for i, c := range parts {
		parts[i] = alias + strings.TrimSpace(c)
	}
	return strings.Join(parts, ", ")
}

// InvoiceVolumes implements store.DashboardStore.
func (s *Store) InvoiceVolumes(ctx context.Context, merchantID int64, from, to time.Time) ([]store.DailyVolume, error) {
	from, to = from.UTC().Truncate(24*time.Hour), to.UTC().Truncate(24*time.Hour)
	if s.d.Name == "postgres" {
		var rows []struct {
			Day      time.Time    `db:"day"`
			ChainID  uint64       `db:"chain_id"`
			Token    []byte       `db:"token"`
			Invoices int64        `db:"invoices"`
			Paid     store.Amount `db:"paid"`
		}
		if err := s.sel(ctx, &rows, `SELECT day, chain_id, token, invoices, paid FROM invoice_daily
			WHERE merchant_id = ? AND day >= ?::date AND day < ?::date AND (invoices <> 0 OR paid <> 0)
			ORDER BY day, chain_id, token`,
			merchantID, from.Format(time.DateOnly), to.Format(time.DateOnly)); err != nil {
			return nil, err
		}
		out := make([]store.DailyVolume, 0, len(rows))
		for _, r := range rows {
			v := store.DailyVolume{Day: time.Date(r.Day.Year(), r.Day.Month(), r.Day.Day(), 0, 0, 0, 0, time.UTC),
				ChainID: r.ChainID, Invoices: r.Invoices, Paid: r.Paid}
			if len(r.Token) == 20 {
				a := common.BytesToAddress(r.Token)
				v.Token = &a
			}
			out = append(out, v)
		}
		return out, nil
	}
	// SQLite keeps decimal text, which SQL would sum in floating point:
	// the embedded store sums in Go.
	var rows []struct {
		CreatedAt time.Time       `db:"created_at"`
		ChainID   uint64          `db:"chain_id"`
		Token     *common.Address `db:"token_address"`
		Paid      store.Amount    `db:"paid_wei"`
	}
	if err := s.sel(ctx, &rows, `SELECT created_at, chain_id, token_address, paid_wei FROM invoices
		WHERE merchant_id = ? AND created_at >= ? AND created_at < ?`, merchantID, from, to); err != nil {
		return nil, err
	}
	type key struct {
		day   time.Time
		chain uint64
		token common.Address
		isTok bool
	}
	sums := map[key]*store.DailyVolume{}
	for _, r := range rows {
		k := key{day: r.CreatedAt.UTC().Truncate(24 * time.Hour), chain: r.ChainID}
		if r.Token != nil {
			k.token, k.isTok = *r.Token, true
		}
		v, ok := sums[k]
		if !ok {
			v = &store.DailyVolume{Day: k.day, ChainID: k.chain, Token: r.Token}
			sums[k] = v
		}
		v.Invoices++
		if sum, ok := v.Paid.Add(r.Paid); ok {
			v.Paid = sum
		}
	}
	out := make([]store.DailyVolume, 0, len(sums))
	for _, v := range sums {
		out = append(out, *v)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Day.Equal(out[j].Day) {
			return out[i].Day.Before(out[j].Day)
		}
		if out[i].ChainID != out[j].ChainID {
			return out[i].ChainID < out[j].ChainID
		}
		return tokenKey(out[i].Token) < tokenKey(out[j].Token)
	})
	return out, nil
}

func tokenKey(t *common.Address) string {
	if t == nil {
		return ""
	}
	return string(t[:])
}
