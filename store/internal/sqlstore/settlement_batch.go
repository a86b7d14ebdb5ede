package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/evmpay/evmpay/store"
)

// Settlement writes a block's payments, invoice changes and events in a
// handful of statements instead of a few per invoice: at 50 invoices a
// block, round trips are most of its cost.

var (
	paymentInsertColumns = []string{"invoice_id", "tx_hash", "log_index", "block_number", "block_hash",
		"from_address", "amount_wei", "late", "created_at", "token_address", "wrong_asset", "chain_id", "wrong_network"}
	eventInsertColumns = []string{"type", "merchant_id", "invoice_id", "data", "created_at"}
)

// InsertPayments implements store.SettlementStore: on PostgreSQL one
// prepared INSERT … SELECT FROM unnest(…) of one array per column (a text
// that never varies: parsed and planned once per connection, one round
// trip), by COPY or row by row elsewhere. The payments arrived on the
// handle's chain, which each records (it sets their ChainID).
func (s *Store) InsertPayments(ctx context.Context, ps []store.Payment) error {
	if len(ps) == 0 {
		return nil
	}
	c, err := s.chainID()
	if err != nil {
		return err
	}
	for i := range ps {
		ps[i].ChainID = uint64(c)
	}
	if s.d.Array != nil {
		n := len(ps)
		var (
			invoices, blocks  = make([]int64, n), make([]int64, n)
			logs              = make([]int64, n)
			txs, hashes, from = make([][]byte, n), make([][]byte, n), make([][]byte, n)
			tokens            = make([][]byte, n)
			amounts           = make([]store.Amount, n)
			late, wrong       = make([]bool, n), make([]bool, n)
			wrongNet          = make([]bool, n)
			created           = make([]time.Time, n)
		)
		for i, p := range ps {
			invoices[i], txs[i], logs[i], hashes[i], from[i] = p.InvoiceID, p.TxHash.Bytes(), int64(p.LogIndex), p.BlockHash.Bytes(), p.From.Bytes()
			blocks[i], amounts[i], late[i], created[i], wrong[i] = int64(p.BlockNumber), p.AmountWei, p.Late, p.CreatedAt, p.WrongAsset
			wrongNet[i] = p.WrongNetwork
			if p.Token != nil {
				tokens[i] = p.Token.Bytes()
			}
		}
		arr := s.d.Array
		_, err := s.execPrepared(ctx, insertPaymentsPostgres, c, arr(invoices), byteaArray(txs), arr(logs), arr(blocks),
			byteaArray(hashes), byteaArray(from), arr(amounts), arr(late), arr(created), byteaArray(tokens), arr(wrong),
			arr(wrongNet))
		return err
	}
	rows := make([][]any, len(ps))
	for i, p := range ps {
		rows[i] = []any{p.InvoiceID, p.TxHash, p.LogIndex, p.BlockNumber, p.BlockHash, p.From, p.AmountWei,
			p.Late, p.CreatedAt, p.Token, p.WrongAsset, c, p.WrongNetwork}
	}
	return s.withTx(ctx, func(t *Store) error { return t.bulkInsert(ctx, "payments", paymentInsertColumns, rows) })
}

// insertPaymentsPostgres: the chain, one parameter, comes first.
const insertPaymentsPostgres = `INSERT INTO payments (chain_id, invoice_id, tx_hash, log_index, block_number, block_hash,
		from_address, amount_wei, late, created_at, token_address, wrong_asset, wrong_network)
	SELECT ?::bigint, u.* FROM unnest(?::bigint[], ?::bytea[], ?::integer[], ?::bigint[], ?::bytea[], ?::bytea[],
		?::numeric[], ?::boolean[], ?::timestamptz[], ?::bytea[], ?::boolean[], ?::boolean[]) AS u`

// InsertEvents implements store.SettlementStore, as InsertPayments does.
func (s *Store) InsertEvents(ctx context.Context, evs []store.Event) error {
	if len(evs) == 0 {
		return nil
	}
	if s.d.Array != nil {
		n := len(evs)
		var (
			types, data         = make([]string, n), make([]string, n)
			merchants, invoices = make([]int64, n), make([]int64, n)
			created             = make([]time.Time, n)
		)
		for i, e := range evs {
			types[i], merchants[i], invoices[i], data[i], created[i] = e.Type, e.MerchantID, e.InvoiceID, string(e.Data), e.CreatedAt
		}
		arr := s.d.Array
		_, err := s.execPrepared(ctx, insertEventsPostgres, arr(types), arr(merchants), arr(invoices), arr(data), arr(created))
		return err
	}
	rows := make([][]any, len(evs))
	for i, e := range evs {
		rows[i] = []any{e.Type, e.MerchantID, e.InvoiceID, e.Data, e.CreatedAt}
	}
	return s.withTx(ctx, func(t *Store) error { return t.bulkInsert(ctx, "events", eventInsertColumns, rows) })
}

const insertEventsPostgres = `INSERT INTO events (type, merchant_id, invoice_id, data, created_at)
	SELECT * FROM unnest(?::text[], ?::bigint[], ?::bigint[], ?::text[], ?::timestamptz[])`

// byteaArray is vals as a PostgreSQL bytea[] literal, hex-encoded, a nil
// element NULL (lib/pq's ByteaArray has no NULL; its GenericArray writes
// bytes unencoded).
func byteaArray(vals [][]byte) string {
	var b strings.Builder
	b.Grow(2 + len(vals)*48)
	b.WriteByte('{')
	for i, v := range vals {
		if i > 0 {
			b.WriteByte(',')
		}
		if v == nil {
			b.WriteString("NULL")
			continue
		}
		b.WriteString(`"\\x`)
		b.WriteString(hex.EncodeToString(v))
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

// stateColumns are the invoice columns settlement writes, in the order of
// stateValues.
var stateColumns = []string{"status", "paid_wei", "underpaid", "overpaid", "paid_late", "needs_attention",
	"paid_at", "confirmed_at", "sweep_status", "updated_at", "paid_value", "late_valuation", "sweep_asset"}

func stateValues(inv *store.Invoice) []any {
	return []any{inv.Status, inv.PaidWei, inv.Underpaid, inv.Overpaid, inv.PaidLate, inv.NeedsAttention,
		inv.PaidAt, inv.ConfirmedAt, inv.SweepStatus, inv.UpdatedAt, inv.PaidValue, inv.LateValuation, inv.SweepAsset}
}

// jsonText is a JSON column's value as text, nil for NULL (for an array
// parameter).
func jsonText(v driver.Valuer) (*string, error) {
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && rv.IsNil() {
		return nil, nil
	}
	x, err := v.Value()
	if err != nil || x == nil {
		return nil, err
	}
	s := x.(string)
	return &s, nil
}

// UpdateInvoiceStates implements store.SettlementStore: on PostgreSQL one
// prepared UPDATE … FROM unnest(…) of one array per column (a text that
// never varies, so it is parsed and planned once per connection), one
// UPDATE per invoice on SQLite (in process, where a statement costs no
// round trip). Every row is fenced by its version.
func (s *Store) UpdateInvoiceStates(ctx context.Context, invs []*store.Invoice) error {
	if len(invs) == 0 {
		return nil
	}
	if s.d.Array == nil {
		return s.withTx(ctx, func(t *Store) error {
			for _, inv := range invs {
				res, err := t.exec(ctx, updateStateSQLite, append(stateValues(inv), inv.ID, inv.Version)...)
				if err != nil {
					return err
				}
				if err := fenced(res, inv); err != nil {
					return err
				}
			}
			bumpVersions(invs)
			return nil
		})
	}
	n := len(invs)
	var (
		ids, versions                        = make([]int64, n), make([]int64, n)
		statuses, sweepStatuses              = make([]string, n), make([]string, n)
		paid                                 = make([]store.Amount, n)
		underpaid, overpaid, late, attention = make([]bool, n), make([]bool, n), make([]bool, n), make([]bool, n)
		paidAt, confirmedAt                  = make([]*time.Time, n), make([]*time.Time, n)
		updatedAt                            = make([]time.Time, n)
		paidValue                            = make([]*store.Amount, n)
		lateValuation, sweepAsset            = make([]*string, n), make([]*string, n)
		err                                  error
	)
	for i, inv := range invs {
		ids[i], versions[i], statuses[i], sweepStatuses[i] = inv.ID, inv.Version, inv.Status, inv.SweepStatus
		paid[i], underpaid[i], overpaid[i], late[i], attention[i] = inv.PaidWei, inv.Underpaid, inv.Overpaid, inv.PaidLate, inv.NeedsAttention
		paidAt[i], confirmedAt[i], updatedAt[i], paidValue[i] = inv.PaidAt, inv.ConfirmedAt, inv.UpdatedAt, inv.PaidValue
		if lateValuation[i], err = jsonText(inv.LateValuation); err != nil {
			return err
		}
		if sweepAsset[i], err = jsonText(inv.SweepAsset); err != nil {
			return err
		}
	}
	arr := s.d.Array
	res, err := s.execPrepared(ctx, updateStatesPostgres, arr(ids), arr(versions), arr(statuses), arr(paid),
		arr(underpaid), arr(overpaid), arr(late), arr(attention), arr(paidAt), arr(confirmedAt),
		arr(sweepStatuses), arr(updatedAt), arr(paidValue), arr(lateValuation), arr(sweepAsset), arr(ids))
	if err != nil {
		return err
	}
	done, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if done != int64(n) {
		return fmt.Errorf("%w: %d of %d invoices changed since they were read", store.ErrConflict, int64(n)-done, n)
	}
	bumpVersions(invs)
	return nil
}

// MoveInvoice implements store.SettlementStore: one UPDATE fenced by the
// version, on both stores (a move is rare: the first counted payment of an
// invoice, on another quoted chain than its own).
func (s *Store) MoveInvoice(ctx context.Context, inv *store.Invoice) error {
	res, err := s.exec(ctx, `UPDATE invoices SET chain_id = ?, token_address = ?, asset_symbol = ?,
			asset_decimals = ?, amount_wei = ?, payment_uri = ?, pricing = ?, updated_at = ?, version = version + 1
		WHERE id = ? AND version = ?`, inv.ChainID, inv.TokenAddress, inv.AssetSymbol, inv.AssetDecimals,
		inv.AmountWei, inv.PaymentURI, inv.Pricing, inv.UpdatedAt, inv.ID, inv.Version)
	if err != nil {
		return err
	}
	if err := fenced(res, inv); err != nil {
		return err
	}
	inv.Version++
	return nil
}

// fenced checks that an UPDATE fenced by inv's version changed its row:
// otherwise the invoice changed since it was read (ErrConflict).
func fenced(res sql.Result, inv *store.Invoice) error {
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n != 1 {
		return fmt.Errorf("%w: invoice %d changed since it was read (version %d)", store.ErrConflict, inv.ID, inv.Version)
	}
	return nil
}

// updateStateSQLite is UpdateInvoiceStates for one invoice.
var updateStateSQLite = func() string {
	var sets []string
	for _, c := range stateColumns {
		sets = append(sets, c+" = ?")
	}
	return `UPDATE invoices SET ` + strings.Join(sets, ", ") + `, version = version + 1 WHERE id = ? AND version = ?`
}()

// updateStatesPostgres is UpdateInvoiceStates on PostgreSQL. The ids come
// twice: i.id = ANY(…) makes the planner find the rows through the primary
// key even in a generic plan, which does not know how many there are.
const updateStatesPostgres = `UPDATE invoices AS i SET status = v.status, paid_wei = v.paid_wei,
		underpaid = v.underpaid, overpaid = v.overpaid, paid_late = v.paid_late,
		needs_attention = v.needs_attention, paid_at = v.paid_at, confirmed_at = v.confirmed_at,
		sweep_status = v.sweep_status, updated_at = v.updated_at, paid_value = v.paid_value,
		late_valuation = v.late_valuation, sweep_asset = v.sweep_asset, version = i.version + 1
	FROM unnest(?::bigint[], ?::bigint[], ?::text[], ?::numeric[], ?::boolean[], ?::boolean[], ?::boolean[],
		?::boolean[], ?::timestamptz[], ?::timestamptz[], ?::text[], ?::timestamptz[], ?::numeric[], ?::text[], ?::text[])
		AS v (id, version, status, paid_wei, underpaid, overpaid, paid_late, needs_attention, paid_at,
			confirmed_at, sweep_status, updated_at, paid_value, late_valuation, sweep_asset)
	WHERE i.id = ANY(?::bigint[]) AND i.id = v.id AND i.version = v.version`

func bumpVersions(invs []*store.Invoice) {
	for _, inv := range invs {
		inv.Version++
	}
}
