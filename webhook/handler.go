package webhook

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/httpapi"
	"github.com/evmpay/evmpay/store/problem"
)

// Authenticator identifies the merchant making an API request. The host
// passes the invoice package's authenticator (api_key bearer tokens).
type Authenticator interface {
	Authenticate(r *http.Request) (store.Merchant, error)
}

// DeliveriesStore is what the deliveries API needs from the database.
// *postgres.Store and *sqlite.Store satisfy it.
type DeliveriesStore interface {
	GetDelivery(ctx context.Context, id int64) (store.Delivery, error)
	ListDeliveries(ctx context.Context, f store.DeliveryFilter) ([]store.Delivery, error)
	ReplayDelivery(ctx context.Context, merchantID, id int64, now time.Time) (store.Delivery, error)
	ReplayFailedDeliveries(ctx context.Context, merchantID int64, since, now time.Time) (int64, error)
}

// DeliveriesAPIConfig tunes a DeliveriesAPI. The zero value is usable.
type DeliveriesAPIConfig struct {
	// Now is the clock replays are due at. Defaults to time.Now.
	Now func() time.Time
	// Logger receives database errors. Defaults to a logger that discards
	// everything.
	Logger *slog.Logger
}

// DeliveriesAPI is the merchant API of webhook deliveries (not a receiver:
// receivers verify with Verify or a Verifier):
//
//	GET  /v1/webhook-deliveries               list, newest first (?status=failed&since=…&limit=…&cursor=…)
//	GET  /v1/webhook-deliveries/{id}          one delivery
//	POST /v1/webhook-deliveries/{id}/replay   replay one delivery
//	POST /v1/webhook-deliveries/replay        replay every failed delivery since {"since": RFC 3339}
//
// Every request is authenticated by the Authenticator; a merchant sees and
// replays only its own deliveries (others are 404). Errors are RFC 9457
// problem JSON with a stable code.
type DeliveriesAPI struct {
	st   DeliveriesStore
	auth Authenticator
	cfg  DeliveriesAPIConfig
	mux  http.Handler
}

// Paging of the list.
const (
	defaultPageSize = 50
	maxPageSize     = 100
	maxReplayBody   = 4 << 10
)

// NewDeliveriesAPI returns the deliveries API over st, authenticating requests
// with auth.
func NewDeliveriesAPI(st DeliveriesStore, auth Authenticator, cfg DeliveriesAPIConfig) (*DeliveriesAPI, error) {
	if st == nil || auth == nil {
		return nil, errors.New("webhook: NewHandler needs a HandlerStore and an Authenticator")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	mux := httpapi.NewMux()
	h := &DeliveriesAPI{st: st, auth: auth, cfg: cfg, mux: mux}
	h.Register(mux)
	return h, nil
}

// Register mounts the API's routes on mux (Go 1.22 patterns, so they sit
// beside the host's other routes). Wrap the mux in httpapi.Problems (an
// httpapi.Mux is) for 404 and 405 problems.
func (h *DeliveriesAPI) Register(mux httpapi.Router) {
	mux.Handle("GET /v1/webhook-deliveries", h.authed(h.list))
	mux.Handle("GET /v1/webhook-deliveries/{id}", h.authed(h.get))
	mux.Handle("POST /v1/webhook-deliveries/{id}/replay", h.authed(h.replay))
	mux.Handle("POST /v1/webhook-deliveries/replay", h.authed(h.replayAll))
}

// ServeHTTP serves the API's routes alone; anything else is a 404 or 405
// problem.
func (h *DeliveriesAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

type handlerFunc func(w http.ResponseWriter, r *http.Request, m store.Merchant) *problem.Problem

func (h *DeliveriesAPI) authed(fn handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m, err := h.auth.Authenticate(r)
		if err != nil {
			var pe *problem.Problem
			if errors.As(err, &pe) {
				problem.Write(w, pe) // the authenticator's own answer (a key without the scope: 403)
				return
			}
			if errors.Is(err, store.ErrUnavailable) {
				problem.Write(w, h.storeError(r.Context(), err))
				return
			}
			problem.Write(w, problem.Of(problem.CodeUnauthorized, "a valid api_key bearer token is required"))
			return
		}
		if e := fn(w, r, m); e != nil {
			problem.Write(w, e)
		}
	})
}

// storeError maps a store error to a problem, in one place.
func (h *DeliveriesAPI) storeError(ctx context.Context, err error) *problem.Problem {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return problem.Of(problem.CodeNotFound, "no such webhook delivery")
	case errors.Is(err, store.ErrConflict):
		return problem.Of(problem.CodeDeliveryPending, "the delivery is still pending: it is already being delivered")
	case errors.Is(err, store.ErrUnavailable):
		h.cfg.Logger.ErrorContext(ctx, "webhook api: database unavailable", slog.Any("error", err))
		return problem.Of(problem.CodeUnavailable, "the service is temporarily unavailable")
	default:
		h.cfg.Logger.ErrorContext(ctx, "webhook api: database error", slog.Any("error", err))
		return problem.Of(problem.CodeInternal, "internal error")
	}
}

// deliveryView is a delivery as the API shows it.
type deliveryView struct {
	ID             int64      `json:"id"`
	EventID        string     `json:"event_id"`
	EventType      string     `json:"event_type"`
	InvoiceID      int64      `json:"invoice_id"`
	Status         string     `json:"status"`
	Delivered      bool       `json:"delivered"`
	ResponseStatus *int       `json:"response_status"`
	Attempt        int        `json:"attempt"`
	LastAttemptAt  *time.Time `json:"last_attempt_at"`
	NextAttemptAt  *time.Time `json:"next_attempt_at"`
	LastError      string     `json:"last_error"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`

	// FailureReason says why a FAILED delivery failed (FailedEndpointBroken
	// or FailedAttemptsExhausted); omitted otherwise.
	FailureReason string `json:"failure_reason,omitempty"`
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func view(d store.Delivery) deliveryView {
	return deliveryView{
		ID: d.ID, EventID: EventID(d.EventID), EventType: d.EventType, InvoiceID: d.InvoiceID,
		Status: d.Status, Delivered: d.Delivered, ResponseStatus: d.ResponseStatus, Attempt: d.Attempt,
		LastAttemptAt: utcPtr(d.LastAttemptAt), NextAttemptAt: utcPtr(d.NextAttemptAt), LastError: d.LastError,
		FailureReason: FailureReason(d, MaxAttempts), CreatedAt: d.CreatedAt.UTC(), UpdatedAt: d.UpdatedAt.UTC(),
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) { httpapi.WriteJSON(w, status, v) }

// encodeCursor and decodeCursor make the opaque continuation token of the
// list: the position below which the next page starts.
func encodeCursor(beforeID int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte("d" + strconv.FormatInt(beforeID, 10)))
}

func decodeCursor(c string) (int64, bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) < 2 || b[0] != 'd' {
		return 0, false
	}
	id, err := strconv.ParseInt(string(b[1:]), 10, 64)
	return id, err == nil && id > 0
}

func (h *DeliveriesAPI) list(w http.ResponseWriter, r *http.Request, m store.Merchant) *problem.Problem {
	f := store.DeliveryFilter{MerchantID: m.ID, Limit: defaultPageSize}
	q, perr := httpapi.Query(r)
	if perr != nil {
		return perr
	}
	for name, vals := range q {
		if len(vals) != 1 {
			return problem.OfField(problem.CodeInvalidParameter, name, "give the parameter once")
		}
		v := vals[0]
		switch name {
		case "status":
			s := strings.ToUpper(v)
			if s != store.DeliveryPending && s != store.DeliveryDelivered && s != store.DeliveryFailed {
				return problem.OfField(problem.CodeInvalidParameter, name, "status is one of pending, delivered, failed")
			}
			f.Status = s
		case "since":
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return problem.OfField(problem.CodeInvalidParameter, name, "since is an RFC 3339 time, such as 2026-01-02T15:04:05Z")
			}
			f.Since = t
		case "limit":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > maxPageSize {
				return problem.OfField(problem.CodeInvalidParameter, name, "limit is an integer from 1 to 100")
			}
			f.Limit = n
		case "cursor":
			id, ok := decodeCursor(v)
			if !ok {
				return problem.OfField(problem.CodeInvalidCursor, name, "cursor is not a next_cursor this API returned")
			}
			f.BeforeID = id
		default:
			return problem.OfField(problem.CodeUnknownParameter, name, "unknown parameter")
		}
	}
	page := f.Limit
	f.Limit = page + 1 // one more tells whether there is a next page
	ds, err := h.st.ListDeliveries(r.Context(), f)
	if err != nil {
		return h.storeError(r.Context(), err)
	}
	resp := struct {
		Data       []deliveryView `json:"data"`
		NextCursor *string        `json:"next_cursor"`
	}{Data: make([]deliveryView, 0, min(len(ds), page))}
	if len(ds) > page {
		ds = ds[:page]
		c := encodeCursor(ds[page-1].ID)
		resp.NextCursor = &c
	}
	for _, d := range ds {
		resp.Data = append(resp.Data, view(d))
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

func pathID(r *http.Request) (int64, *problem.Problem) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, problem.Of(problem.CodeNotFound, "no such webhook delivery")
	}
	return id, nil
}

func (h *DeliveriesAPI) get(w http.ResponseWriter, r *http.Request, m store.Merchant) *problem.Problem {
	id, e := pathID(r)
	if e != nil {
		return e
	}
	d, err := h.st.GetDelivery(r.Context(), id)
	if err == nil && d.MerchantID != m.ID {
		err = store.ErrNotFound
	}
	if err != nil {
		return h.storeError(r.Context(), err)
	}
	writeJSON(w, http.StatusOK, view(d))
	return nil
}

func (h *DeliveriesAPI) replay(w http.ResponseWriter, r *http.Request, m store.Merchant) *problem.Problem {
	id, e := pathID(r)
	if e != nil {
		return e
	}
	d, err := h.st.ReplayDelivery(r.Context(), m.ID, id, h.cfg.Now())
	if err != nil {
		return h.storeError(r.Context(), err)
	}
	writeJSON(w, http.StatusAccepted, view(d))
	return nil
}

func (h *DeliveriesAPI) replayAll(w http.ResponseWriter, r *http.Request, m store.Merchant) *problem.Problem {
	if !httpapi.CheckJSON(w, r) {
		return nil
	}
	if r.ContentLength > maxReplayBody {
		return problem.Of(problem.CodeBodyTooLarge, "the request body is larger than 4096 bytes")
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxReplayBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return problem.Of(problem.CodeBodyTooLarge, "the request body is larger than 4096 bytes")
		}
		return problem.Of(problem.CodeInvalidJSON, "the request body could not be read")
	}
	var req struct {
		Since *string `json:"since"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || dec.More() {
		return problem.Of(problem.CodeInvalidJSON, `the body is one JSON object: {"since": "<RFC 3339 time>"}`)
	}
	if req.Since == nil {
		return problem.OfField(problem.CodeMissingField, "since", "since is required")
	}
	since, err := time.Parse(time.RFC3339, *req.Since)
	if err != nil {
		return problem.OfField(problem.CodeInvalidField, "since", "since is an RFC 3339 time, such as 2026-01-02T15:04:05Z")
	}
	n, err := h.st.ReplayFailedDeliveries(r.Context(), m.ID, since, h.cfg.Now())
	if err != nil {
		return h.storeError(r.Context(), err)
	}
	writeJSON(w, http.StatusAccepted, struct {
		Replayed int64     `json:"replayed"`
		Since    time.Time `json:"since"`
	}{n, since.UTC()})
	return nil
}
