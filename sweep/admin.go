package sweep

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/httpapi"
	"github.com/evmpay/evmpay/store/problem"
)

// RetryPath is the operator endpoint that re-queues FAILED sweeps.
const RetryPath = "/v1/admin/sweeps/retry"

// maxRetryIDs bounds the invoice ids of one retry request, and maxRetryAll
// the sweeps one "retry all" request re-queues.
const (
	maxRetryIDs = 1000
	maxRetryAll = 10000
)

// RetryResult is what a retry re-queued and what it left alone.
type RetryResult struct {
	Requeued []Requeued `json:"requeued"`
	Skipped  []Skipped  `json:"skipped"`
	// Truncated: "retry all" stopped at its limit; call it again.
	Truncated bool `json:"truncated"`
}

// Requeued is a FAILED sweep put back in the QUEUED state.
type Requeued struct {
	InvoiceID int64 `json:"invoice_id"`
	// PreviousError is the sweep_error it had.
	PreviousError string `json:"previous_error"`
}

// Skipped is a requested invoice that was not re-queued.
type Skipped struct {
	InvoiceID int64 `json:"invoice_id"`
	// Reason is "not found" or "not failed".
	Reason      string `json:"reason"`
	SweepStatus string `json:"sweep_status,omitempty"`
}

// Admin is the operator side of sweep: re-queueing FAILED sweeps. It needs
// only the database — no key, no node — so a host can serve it from a
// process that does not sweep (NewAdmin); a Sweeper has one too
// (Sweeper.AdminHandler, Sweeper.Retry).
type Admin struct {
	st  Store
	cfg Config
	log *slog.Logger
}

// NewAdmin returns the operator endpoints over st. Of cfg it uses
// OperatorToken, Now and Logger.
func NewAdmin(st Store, cfg Config) (*Admin, error) {
	if st == nil {
		return nil, errors.New("sweep: a store is required")
	}
	cfg = cfg.withDefaults()
	return &Admin{st: st, cfg: cfg, log: cfg.Logger}, nil
}

// Retry is Admin.Retry on the sweeper's store.
func (s *Sweeper) Retry(ctx context.Context, ids []int64) (RetryResult, error) {
	return s.admin.Retry(ctx, ids)
}

// AdminHandler is Admin.Handler on the sweeper's store.
func (s *Sweeper) AdminHandler() http.Handler { return s.admin.Handler() }

// Retry re-queues FAILED sweeps: the invoices ids, or every FAILED sweep
// when ids is empty (at most 10000 per call; Truncated says when more are
// left). The next pass resumes each from its stored transactions — a
// funding already signed is re-broadcast, not signed again — with its
// attempt count reset.
func (a *Admin) Retry(ctx context.Context, ids []int64) (RetryResult, error) {
	res := RetryResult{Requeued: []Requeued{}, Skipped: []Skipped{}}
	if len(ids) == 0 {
		var after int64
		for len(res.Requeued) < maxRetryAll {
			invs, err := a.st.ListInvoicesBySweepStatus(ctx, store.SweepFailed, after, min(500, maxRetryAll-len(res.Requeued)))
			if err != nil {
				return res, err
			}
			if len(invs) == 0 {
				return res, nil
			}
			for _, inv := range invs {
				ids = append(ids, inv.ID)
				after = inv.ID
			}
			if err := a.requeue(ctx, ids, &res); err != nil {
				return res, err
			}
			ids = ids[:0]
		}
		more, err := a.st.ListInvoicesBySweepStatus(ctx, store.SweepFailed, 0, 1)
		res.Truncated = len(more) > 0
		return res, err
	}
	return res, a.requeue(ctx, ids, &res)
}

func (a *Admin) requeue(ctx context.Context, ids []int64, res *RetryResult) error {
	now := a.cfg.Now().UTC()
	for _, id := range ids {
		var skipped *Skipped
		var previous string
		err := updateInvoice(ctx, a.st, id, func(inv *store.Invoice) bool {
			skipped, previous = nil, inv.SweepError
			if inv.SweepStatus != store.SweepFailed {
				skipped = &Skipped{InvoiceID: id, Reason: "not failed", SweepStatus: inv.SweepStatus}
				return false
			}
			inv.SweepStatus, inv.SweepError, inv.SweepAttempts = store.SweepQueued, "", 0
			inv.SweepNextAttemptAt, inv.SweepLockedUntil, inv.UpdatedAt = nil, nil, now
			return true
		})
		switch {
		case errors.Is(err, store.ErrNotFound):
			res.Skipped = append(res.Skipped, Skipped{InvoiceID: id, Reason: "not found"})
		case err != nil:
			return err
		case skipped != nil:
			res.Skipped = append(res.Skipped, *skipped)
		default:
			res.Requeued = append(res.Requeued, Requeued{InvoiceID: id, PreviousError: previous})
			a.log.InfoContext(ctx, "sweep: re-queued", slog.Int64("invoice_id", id), slog.String("previous_error", previous))
		}
	}
	return nil
}

// Handler serves the operator endpoints alone:
//
//	POST /v1/admin/sweeps/retry   body {"invoice_ids":[…]} or empty for every FAILED sweep
//
// It answers 200 with a RetryResult. Requests carry the operator token
// (Config.OperatorToken) as "Authorization: Bearer <token>" (parsed by
// httpapi.BearerToken, like every evmpay endpoint). Errors are RFC 9457
// problem documents with a stable code: unauthorized (401), admin_disabled
// (503, no token configured), invalid_request (400),
// unsupported_media_type (415, a body that is not application/json),
// method_not_allowed (405), not_found (404), internal (500). Mount it on a
// host's mux, or Register its route there:
//
//	mux.Handle("/v1/admin/sweeps/", admin.Handler())
func (a *Admin) Handler() http.Handler {
	mux := httpapi.NewMux()
	a.Register(mux)
	return mux
}

// Register adds the operator endpoint (a Go 1.22 pattern) to mux, for a
// host that serves several packages on one mux.
func (a *Admin) Register(mux httpapi.Router) {
	mux.Handle("POST "+RetryPath, a.operator(http.HandlerFunc(a.serveRetry)))
}

// operator lets through requests that carry the operator token.
func (a *Admin) operator(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.cfg.OperatorToken == "" {
			problem.Reply(w, problem.CodeAdminDisabled, "no operator token is configured")
			return
		}
		if !httpapi.OperatorAuthorized(r, a.cfg.OperatorToken) {
			problem.Reply(w, problem.CodeUnauthorized, "a valid operator token is required")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (a *Admin) serveRetry(w http.ResponseWriter, r *http.Request) {
	var req struct {
		InvoiceIDs *[]int64 `json:"invoice_ids"`
	}
	if !httpapi.CheckJSON(w, r) {
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10+1))
	if err != nil {
		problem.Reply(w, problem.CodeInvalidRequest, "could not read the body")
		return
	}
	if len(body) > 64<<10 {
		problem.Reply(w, problem.CodeInvalidRequest, "the body is larger than 64 KiB")
		return
	}
	if len(strings.TrimSpace(string(body))) > 0 {
		dec := json.NewDecoder(strings.NewReader(string(body)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			problem.Reply(w, problem.CodeInvalidRequest, `the body must be {"invoice_ids":[…]} or empty`)
			return
		}
		if dec.More() {
			problem.Reply(w, problem.CodeInvalidRequest, "the body must be one JSON object")
			return
		}
	}
	var ids []int64
	if req.InvoiceIDs != nil {
		ids = *req.InvoiceIDs
		switch {
		case len(ids) == 0:
			problem.Reply(w, problem.CodeInvalidRequest, "invoice_ids is empty; omit it to retry every failed sweep")
			return
		case len(ids) > maxRetryIDs:
			problem.Reply(w, problem.CodeInvalidRequest, "at most 1000 invoice_ids per request")
			return
		}
		for _, id := range ids {
			if id <= 0 {
				problem.Reply(w, problem.CodeInvalidRequest, "invoice ids are positive integers")
				return
			}
		}
	}
	res, err := a.Retry(r.Context(), ids)
	if err != nil {
		a.log.ErrorContext(r.Context(), "sweep: retry", slog.String("error", err.Error()))
		problem.Reply(w, problem.CodeInternal, "the retry could not be completed; some sweeps may have been re-queued")
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, res)
}
