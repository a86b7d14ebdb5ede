package invoice

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/ethereum/go-ethereum/common"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/problem"
)

// InvoiceSearch is InvoiceQuery with the dashboard's filters (issue #35):
// the asset, an amount range in its base units, and a search term.
type InvoiceSearch struct {
	InvoiceQuery
	// Asset is a symbol or token address ("" every asset).
	Asset string
	// MinAmount and MaxAmount bound the invoice's amount, in the asset's
	// base units (inclusive); they need Asset.
	MinAmount, MaxAmount *store.Amount
	// Query is an invoice id, an order id, a deposit address (0x + 40
	// hex) or the hash of a transaction that paid it (0x + 64 hex).
	Query string
}

// invoiceSearcher is the store's search (store.DashboardStore); both
// stores have it.
type invoiceSearcher interface {
	SearchInvoices(ctx context.Context, f store.InvoiceSearch) ([]store.Invoice, error)
}

// searchScan bounds the invoices one page of an amount-range search reads
// (the range is checked in Go: amounts are exact uint256, which SQLite
// cannot compare in SQL).
const searchScan = 2000

// SearchInvoices returns a page of merchant merchantID's invoices
// matching q, newest first: indexed lookups by id, order id, deposit
// address or transaction hash, filtered by status, dates and asset.
func (s *Service) SearchInvoices(ctx context.Context, merchantID int64, q InvoiceSearch) (InvoicePage, error) {
	f := store.InvoiceSearch{InvoiceFilter: store.InvoiceFilter{MerchantID: merchantID, CreatedAfter: q.CreatedAfter,
		CreatedBefore: q.CreatedBefore}}
	for _, st := range q.Statuses {
		st = strings.ToUpper(strings.TrimSpace(st))
		if !containsString(invoiceStatuses, st) {
			return InvoicePage{}, problem.OfField(problem.CodeInvalidParameter, "status", "status must be one or more of "+strings.Join(invoiceStatuses, ", "))
		}
		f.Statuses = append(f.Statuses, st)
	}
	if q.Asset != "" {
		a, ok := s.homeChain().assets.lookup(q.Asset)
		if !ok {
			return InvoicePage{}, problem.OfField(problem.CodeUnknownAsset, "asset", "not an asset this service accepts")
		}
		f.AssetSet, f.Token = true, a.Token()
	} else if q.MinAmount != nil || q.MaxAmount != nil {
		return InvoicePage{}, problem.OfField(problem.CodeInvalidParameter, "asset", "an amount range needs an asset")
	}
	switch term := strings.TrimSpace(q.Query); {
	case term == "":
	case len(term) == 42 && strings.HasPrefix(strings.ToLower(term), "0x"):
		a, err := store.ParseAddress(term)
		if err != nil {
			return InvoicePage{}, problem.OfField(problem.CodeInvalidAddress, "q", "not an address (a mixed-case one must have its EIP-55 checksum)")
		}
		f.DepositAddress = &a
	case len(term) == 66 && strings.HasPrefix(strings.ToLower(term), "0x") && isHex(term[2:]):
		h := common.HexToHash(term)
		f.TxHash = &h
	default:
		if id, err := strconv.ParseInt(strings.TrimPrefix(term, "#"), 10, 64); err == nil && id > 0 {
			f.ID = id
		}
		f.OrderID = term
	}
	var perr *problem.Problem
	var limit int
	if limit, f.BeforeID, perr = pageOf(q.Limit, q.Cursor); perr != nil {
		return InvoicePage{}, perr
	}
	searcher, ok := s.st.(invoiceSearcher)
	if !ok {
		return InvoicePage{}, errors.New("invoice: the store cannot search invoices")
	}
	var out []store.Invoice
	hasMore, last, scanned := false, int64(0), 0
	for {
		f.Limit = limit + 1
		if q.MinAmount != nil || q.MaxAmount != nil {
			f.Limit = 200
		}
		invs, err := searcher.SearchInvoices(ctx, f)
		if err != nil {
			return InvoicePage{}, err
		}
		for _, inv := range invs {
			last = inv.ID
			scanned++
			if q.MinAmount != nil && inv.AmountWei.Cmp(*q.MinAmount) < 0 || q.MaxAmount != nil && inv.AmountWei.Cmp(*q.MaxAmount) > 0 {
				continue
			}
			if len(out) == limit {
				hasMore = true
				break
			}
			out = append(out, inv)
		}
		if hasMore || len(invs) < f.Limit {
			break
		}
		if scanned >= searchScan {
			hasMore = true // the page is cut short; the cursor goes on from the last invoice read
			break
		}
		f.BeforeID = last
	}
	var page InvoicePage
	if hasMore {
		page.HasMore = true
		c := encodeCursor(last)
		if len(out) == limit {
			c = encodeCursor(out[len(out)-1].ID)
		}
		page.NextCursor = &c
	}
	var err error
	if page.Data, err = s.views(ctx, out); err != nil {
		return InvoicePage{}, err
	}
	return page, nil
}

func containsString(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func isHex(s string) bool {
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}
