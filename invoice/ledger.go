package invoice

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"iter"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/evmpay/evmpay/store/api"
	"github.com/evmpay/evmpay/store/httpapi"
	"github.com/evmpay/evmpay/store/problem"
)

// ledgerPage is how many entries the export reads at a time: memory holds
// one page, whatever the period (a year's entries stream through it).
const ledgerPage = 1000

// handleLedger streams the merchant's ledger entries of a period, in time
// order, as CSV (default) or JSON lines: GET /v1/ledger?from=&to=&format=.
// from (inclusive) and to (exclusive) are RFC 3339 times; absent: from the
// first entry, to the last. Entries are read a page at a time by their (at,
// id) position and written as they come, so memory does not grow with the
// period. A failure after the first bytes went out aborts the response (a
// truncated transfer, never a file that looks complete).
func (s *Service) handleLedger(w http.ResponseWriter, r *http.Request) {
	m := principal(r).Merchant
	s.exportLedger(w, r, &m.ID)
}

// handleAdminLedger answers GET /v1/admin/ledger: the operator's export of
// every entry — the sweep wallet's, the gas funder's and every merchant's —
// in the same formats as a merchant's (operator token).
func (s *Service) handleAdminLedger(w http.ResponseWriter, r *http.Request) {
	if s.operator(w, r) {
		s.exportLedger(w, r, nil)
	}
}

// exportLedger streams the entries of one merchant (nil: all of them),
// from the Go API's Ledger: the first entry (or the error) is read before
// the status line is written, so that a database that does not answer is
// a 503 problem rather than an empty file.
func (s *Service) exportLedger(w http.ResponseWriter, r *http.Request, merchantID *int64) {
	q, perr := httpapi.Query(r)
	if perr != nil {
		problem.Write(w, perr)
		return
	}
	var lq LedgerQuery
	format := "csv"
	for name, vals := range q {
		if len(vals) > 1 {
			problem.Write(w, problem.OfField(problem.CodeInvalidParameter, name, name+" must be given once"))
			return
		}
		switch name {
		case "from", "to":
			t, err := time.Parse(time.RFC3339Nano, vals[0])
			if err != nil {
				problem.Write(w, problem.OfField(problem.CodeInvalidParameter, name, name+" must be an RFC 3339 time, e.g. 2026-01-01T00:00:00Z"))
				return
			}
			if name == "from" {
				lq.From = t
			} else {
				lq.To = t
			}
		case "format":
			if vals[0] != "csv" && vals[0] != "jsonl" {
				problem.Write(w, problem.OfField(problem.CodeInvalidParameter, name, "format must be csv or jsonl"))
				return
			}
			format = vals[0]
		default:
			problem.Write(w, problem.OfField(problem.CodeUnknownParameter, name,
				"unknown query parameter "+strconv.Quote(name)+" (allowed: from, to, format)"))
			return
		}
	}
	entries := s.AllLedger(r.Context(), lq)
	if merchantID != nil {
		entries = s.Ledger(r.Context(), *merchantID, lq)
	}
	next, stop := iter.Pull2(entries)
	defer stop()
	first, err, more := next()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	h := w.Header()
	name := "ledger"
	if !lq.From.IsZero() {
		name += "-from-" + lq.From.UTC().Format("20060102T150405Z")
	}
	if !lq.To.IsZero() {
		name += "-to-" + lq.To.UTC().Format("20060102T150405Z")
	}
	if format == "csv" {
		h.Set("Content-Type", "text/csv; charset=utf-8")
		name += ".csv"
	} else {
		h.Set("Content-Type", "application/jsonl; charset=utf-8")
		name += ".jsonl"
	}
	h.Set("Content-Disposition", `attachment; filename="`+name+`"`)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	bw := bufio.NewWriterSize(w, 64<<10)
	cw := csv.NewWriter(bw)
	enc := json.NewEncoder(bw)
	if format == "csv" {
		_ = cw.Write(api.LedgerCSVHeader())
	}
	rows := 0
	for v := first; more; v, err, more = next() {
		if err != nil {
			who := slog.String("merchant_id", "all")
			if merchantID != nil {
				who = slog.Int64("merchant_id", *merchantID)
			}
			s.log.WarnContext(r.Context(), "ledger export aborted", who, slog.Int("rows_sent", rows), slog.String("error", err.Error()))
			panic(http.ErrAbortHandler)
		}
		if rows%ledgerPage == 0 {
			// A long period keeps writing: each page gets its own deadline.
			_ = rc.SetWriteDeadline(time.Now().Add(time.Minute))
		}
		if format == "csv" {
			err = cw.Write(v.CSV())
		} else {
			err = enc.Encode(v)
		}
		if err != nil {
			return // the client went away
		}
		rows++
		if rows%ledgerPage == 0 {
			cw.Flush()
			if err := bw.Flush(); err != nil {
				return
			}
			_ = rc.Flush()
		}
	}
	cw.Flush()
	_ = bw.Flush()
}
