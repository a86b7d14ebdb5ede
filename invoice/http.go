package invoice

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/holiman/uint256"

	"github.com/evmpay/evmpay/invoice/pricing"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/api"
	"github.com/evmpay/evmpay/store/httpapi"
	"github.com/evmpay/evmpay/store/problem"
)

// route is one endpoint: a Go 1.22 ServeMux pattern, the credential it
// takes (scope) and its handler.
type route struct {
	method, path string
	// scope is what a merchant's API key must hold (store.ScopeRead, …,
	// scopeOwner: the merchant's own key only), scopeOperator for the
	// operator's token, or scopePublic (the handler checks a lookup or
	// claim token itself, or nothing).
	scope   string
	handler func(*Service, http.ResponseWriter, *http.Request)
}

// Credentials of routes besides the scopes of merchants' keys.
const (
	// scopeOwner: the merchant's own key only (it has every scope): what
	// manages keys and the controls on what the service sends out, so that
	// a scoped key can never mint or loosen its own controls.
	scopeOwner    = "owner"
	scopeOperator = "operator"
	scopePublic   = "public"
)

// routes lists every endpoint. The OpenAPI document describes exactly
// these, with their scopes (a test checks both ways).
var routes = []route{
	{"POST", "/v1/invoices", store.ScopeInvoices, (*Service).handleCreateInvoice},
	{"GET", "/v1/invoices", store.ScopeRead, (*Service).handleListInvoices},
	{"GET", "/v1/invoices/{id}", store.ScopeRead, (*Service).handleGetInvoice},
	{"GET", "/v1/invoices/{id}/qr.png", store.ScopeRead, (*Service).handleQRPNG},
	{"GET", "/v1/invoices/{id}/qr.svg", store.ScopeRead, (*Service).handleQRSVG},
	{"GET", "/v1/merchant", store.ScopeRead, (*Service).handleGetMerchant},
	{"PATCH", "/v1/merchant", store.ScopeAdmin, (*Service).handleUpdateMerchant},
	{"POST", "/v1/merchant/api-key/rotate", scopeOwner, (*Service).handleRotateAPIKey},
	{"POST", "/v1/merchant/webhook-secret/rotate", store.ScopeAdmin, (*Service).handleRotateWebhookSecret},
	{"GET", "/v1/merchant/branding", store.ScopeRead, (*Service).handleGetBranding},
	{"PUT", "/v1/merchant/branding", store.ScopeAdmin, (*Service).handlePutBranding},
	{"POST", "/v1/admin/merchants", scopeOperator, (*Service).handleAdminCreateMerchant},
	{"GET", "/v1/admin/merchants/{id}", scopeOperator, (*Service).handleAdminGetMerchant},
	{"POST", "/v1/admin/merchants/{id}/api-key/rotate", scopeOperator, (*Service).handleAdminRotateAPIKey},
	{"GET", "/v1/public/invoice", scopePublic, (*Service).handlePublicInvoice},
	{"GET", "/v1/public/invoice/qr.svg", scopePublic, (*Service).handlePublicQRSVG},
	{"GET", "/v1/public/invoice/branding", scopePublic, (*Service).handlePublicBranding},
	{"GET", "/v1/public/invoice/logo", scopePublic, (*Service).handlePublicLogo},
	{"GET", "/v1/openapi.json", scopePublic, (*Service).handleOpenAPI},
}

// Routes registers every endpoint of the invoice API on mux (an
// *http.ServeMux or an httpapi.Mux), with Go 1.22 method and path patterns
// ("POST /v1/invoices"). Wrap the mux in httpapi.Problems (an httpapi.Mux
// is) so that unknown paths and wrong methods are answered as problems too
// (404, 405 with Allow), like every other evmpay API. It panics, like
// ServeMux.Handle, when a pattern conflicts with one already registered.
//
// A merchant's route authenticates the API key and checks its scope
// before its handler runs: a key without the scope gets 403
// insufficient_scope.
func (s *Service) Routes(mux httpapi.Router) {
	for _, rt := range append(append([]route{}, routes...), outboundRoutes...) {
		h, scope := rt.handler, rt.scope
		mux.Handle(rt.method+" "+rt.path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if scope != scopePublic && scope != scopeOperator {
				p, ok := s.authorize(w, r, scope)
				if !ok {
					return
				}
				r = r.WithContext(context.WithValue(r.Context(), principalKey{}, p))
			}
			h(s, w, r)
		}))
	}
}

// Handler returns a mux serving only the invoice API (Routes on a new
// httpapi.Mux).
func (s *Service) Handler() http.Handler {
	mux := httpapi.NewMux()
	s.Routes(mux)
	return mux
}

// PublicHandler serves the payer's reads alone — GET /v1/public/invoice,
// …/qr.svg, …/branding and …/logo — for a process that exposes only the
// read API. Mount it at each path.
func (s *Service) PublicHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			problem.Write(w, problem.Of(problem.CodeMethodNotAllowed, r.Method+" is not allowed here; allowed: GET, HEAD"))
			return
		}
		switch {
		case strings.HasSuffix(r.URL.Path, "/qr.svg"):
			s.handlePublicQRSVG(w, r)
		case strings.HasSuffix(r.URL.Path, "/branding"):
			s.handlePublicBranding(w, r)
		case strings.HasSuffix(r.URL.Path, "/logo"):
			s.handlePublicLogo(w, r)
		default:
			s.handlePublicInvoice(w, r)
		}
	})
}

// problemOf is the problem err answers as — the one mapping of the HTTP
// API and of ErrorCode: API errors as they are, an invalid merchant its
// field's problem, unauthorized 401, not found 404, the chain or the
// database unreachable 503, anything else a bare 500 (internal: logged,
// never shown).
func problemOf(err error) (p *problem.Problem, internal bool) {
	var ae *problem.Problem
	switch {
	case errors.As(err, &ae):
		return ae, false
	case errors.Is(err, ErrInvalidMerchant):
		return merchantError(err), false
	case errors.Is(err, ErrUnauthorized):
		return errUnauthorized, false
	case errors.Is(err, store.ErrNotFound):
		return errNotFound, false
	case errors.Is(err, errChainUnavailable):
		return problem.Of(problem.CodeChainUnavailable,
			"the chain node did not answer, so the settlement address could not be checked; nothing was changed, retry later"), false
	case errors.Is(err, store.ErrUnavailable):
		return problem.Of(problem.CodeUnavailable, "the database is unavailable; retry later"), false
	}
	return problem.Of(problem.CodeInternal, "internal error"), true
}

// fail writes err as a problem (problemOf), logging what the operator
// needs to know: unreachable dependencies and internal failures.
func (s *Service) fail(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		// The client went away; nobody reads this.
		problem.Write(w, problem.Of(problem.CodeUnavailable, "request cancelled"))
		return
	}
	p, internal := problemOf(err)
	switch {
	case internal:
		s.log.ErrorContext(r.Context(), "request failed", slog.String("method", r.Method),
			slog.String("path", r.URL.Path), slog.String("error", err.Error()))
	case p.Code == problem.CodeChainUnavailable:
		s.log.WarnContext(r.Context(), "chain unavailable", slog.String("method", r.Method),
			slog.String("path", r.URL.Path), slog.String("error", err.Error()))
	case p.Code == problem.CodeUnavailable:
		s.log.WarnContext(r.Context(), "database unavailable", slog.String("method", r.Method),
			slog.String("path", r.URL.Path), slog.String("error", err.Error()))
	}
	problem.Write(w, p)
}

var (
	errTooManyLookups = problem.Of(problem.CodeRateLimited,
		"too many failed lookups from this address; retry after the seconds in Retry-After")
	errUnauthorized = problem.Of(problem.CodeUnauthorized,
		"a valid bearer credential is required")
	errNotFound = problem.Of(problem.CodeNotFound, "no such resource")
)

func writeJSON(w http.ResponseWriter, status int, v any) { httpapi.WriteJSON(w, status, v) }

func writeBody(w http.ResponseWriter, status int, body []byte) {
	httpapi.WriteJSONBody(w, status, body)
}

// merchant is the request's merchant, authenticated by Routes (with the
// route's scope), writing the problem when it fails.
//
// Without a principal (a handler reached around Routes) it answers 401:
// it never authenticates a key without the route's scope check.
func (s *Service) merchant(w http.ResponseWriter, r *http.Request) (store.Merchant, bool) {
	if p, ok := r.Context().Value(principalKey{}).(Principal); ok {
		return p.Merchant, true
	}
	problem.Write(w, errUnauthorized)
	return store.Merchant{}, false
}

// principalKey is the request context's key of the authenticated
// Principal.
type principalKey struct{}

// principal is the request's Principal (set by Routes).
func principal(r *http.Request) Principal {
	p, _ := r.Context().Value(principalKey{}).(Principal)
	return p
}

// authorize authenticates the request's API key and checks that it holds
// scope, writing the problem when either fails.
func (s *Service) authorize(w http.ResponseWriter, r *http.Request, scope string) (Principal, bool) {
	key, ok := httpapi.BearerToken(r)
	if !ok {
		problem.Write(w, errUnauthorized)
		return Principal{}, false
	}
	p, err := s.auth.AuthenticatePrincipal(r.Context(), key)
	if err != nil {
		s.fail(w, r, err)
		return Principal{}, false
	}
	if perr := scopeProblem(p, scope); perr != nil {
		problem.Write(w, perr)
		return Principal{}, false
	}
	return p, true
}

// scopeProblem is the 403 of a principal lacking scope, or nil.
func scopeProblem(p Principal, scope string) *problem.Problem {
	switch {
	case scope == scopeOwner && p.KeyID != 0:
		return problem.Of(problem.CodeInsufficientScope,
			"only the merchant's own API key may do this (it manages keys and the controls on refunds and payouts)")
	case scope != scopeOwner && !p.Has(scope):
		return problem.Of(problem.CodeInsufficientScope, "this API key lacks the "+strconv.Quote(scope)+" scope")
	}
	return nil
}

// RouteAuthenticator authenticates requests to another package's merchant
// routes (the webhook deliveries API) with the scope their method needs:
// read for GET and HEAD, admin for the others (replays). A key without it
// gets the 403 insufficient_scope problem as its error.
type RouteAuthenticator struct{ s *Service }

// RouteAuthenticator returns the authenticator of other packages' merchant
// routes.
func (s *Service) RouteAuthenticator() RouteAuthenticator { return RouteAuthenticator{s: s} }

// Authenticate returns the merchant of the request's API key, if the key
// holds the scope of the request's method.
func (a RouteAuthenticator) Authenticate(r *http.Request) (store.Merchant, error) {
	scope := store.ScopeAdmin
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		scope = store.ScopeRead
	}
	key, ok := httpapi.BearerToken(r)
	if !ok {
		return store.Merchant{}, ErrUnauthorized
	}
	p, err := a.s.auth.AuthenticatePrincipal(r.Context(), key)
	if err != nil {
		return store.Merchant{}, err
	}
	if perr := scopeProblem(p, scope); perr != nil {
		return store.Merchant{}, perr
	}
	return p.Merchant, nil
}

// idempotencyKey reads the Idempotency-Key header: a token or an RFC 8941
// string ("…"), 1 to 255 printable ASCII characters.
func idempotencyKey(r *http.Request) (string, *problem.Problem) {
	vals := r.Header.Values("Idempotency-Key")
	if len(vals) == 0 || strings.TrimSpace(vals[0]) == "" {
		return "", problem.Of(problem.CodeKeyMissing, "the Idempotency-Key header is required")
	}
	key := strings.TrimSpace(vals[0])
	if len(key) >= 2 && key[0] == '"' && key[len(key)-1] == '"' {
		key = key[1 : len(key)-1]
	}
	bad := problem.Of(problem.CodeKeyInvalid,
		"Idempotency-Key must be one value of 1 to 255 printable ASCII characters")
	if len(vals) > 1 || key == "" || len(key) > maxKeyLen {
		return "", bad
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e || key[i] == '"' || key[i] == '\\' {
			return "", bad
		}
	}
	return key, nil
}

// idempotentBody reads what every creating request starts with: its
// Idempotency-Key, a JSON content type and the body within the size limit.
// It answers the problem itself and returns ok false when one is wrong.
func (s *Service) idempotentBody(w http.ResponseWriter, r *http.Request) (key string, body []byte, ok bool) {
	key, perr := idempotencyKey(r)
	if perr != nil {
		problem.Write(w, perr)
		return "", nil, false
	}
	if !httpapi.CheckJSON(w, r) {
		return "", nil, false
	}
	if body, perr = readBody(w, r, s.cfg.MaxBodyBytes); perr != nil {
		problem.Write(w, perr)
		return "", nil, false
	}
	return key, body, true
}

func (s *Service) handleCreateInvoice(w http.ResponseWriter, r *http.Request) {
	m, ok := s.merchant(w, r)
	if !ok {
		return
	}
	key, body, ok := s.idempotentBody(w, r)
	if !ok {
		return
	}
	resp, err := s.createInvoiceFrom(r.Context(), m, key, requestFingerprint(r.Method, "/v1/invoices", body), body)
	if err != nil {
		if errors.Is(err, errInFlight) {
			w.Header().Set("Retry-After", "1")
		}
		if errors.Is(err, pricing.ErrRateUnavailable) {
			p, after := rateUnavailable(err)
			s.log.WarnContext(r.Context(), "invoice not created: no rate", slog.Int64("merchant_id", m.ID),
				slog.String("error", err.Error()), slog.String("retry_after", after))
			w.Header().Set("Retry-After", after)
			problem.Write(w, p)
			return
		}
		s.fail(w, r, err)
		return
	}
	if resp.invoiceID != 0 {
		w.Header().Set("Location", s.cfg.BaseURL+"/v1/invoices/"+strconv.FormatInt(resp.invoiceID, 10))
	}
	if resp.replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeBody(w, resp.status, resp.body)
}

// invoiceOf reads invoice {id} of the authenticated merchant; another
// merchant's invoice is "not found", exactly like a missing one.
func (s *Service) invoiceOf(w http.ResponseWriter, r *http.Request) (store.Invoice, bool) {
	inv, err := s.invoiceOfMerchant(r.Context(), principal(r).Merchant.ID, pathID(r))
	if err != nil {
		s.fail(w, r, err)
		return store.Invoice{}, false
	}
	return inv, true
}

func (s *Service) handleGetInvoice(w http.ResponseWriter, r *http.Request) {
	v, err := s.Invoice(r.Context(), principal(r).Merchant.ID, pathID(r))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// views is the merchant's view of invs; fiat invoices carry their
// payments, each with its value (one query for all of them).
func (s *Service) views(ctx context.Context, invs []store.Invoice) ([]View, error) {
	out := make([]View, len(invs))
	var fiat []int64
	for i, inv := range invs {
		out[i] = s.view(inv)
		// Something arrived: a fiat invoice's payments are valued; any
		// invoice flagged by a wrong asset or network shows what came.
		if inv.IsFiat() && inv.PaidValue != nil || inv.NeedsAttention {
			fiat = append(fiat, inv.ID)
		}
	}
	if len(fiat) == 0 {
		return out, nil
	}
	ps, err := s.st.ListPaymentsByInvoices(ctx, fiat)
	if err != nil {
		return nil, err
	}
	byInvoice := map[int64][]store.Payment{}
	for _, p := range ps {
		byInvoice[p.InvoiceID] = append(byInvoice[p.InvoiceID], p)
	}
	for i, inv := range invs {
		if ps := byInvoice[inv.ID]; len(ps) > 0 {
			out[i].Payments = api.NewPayments(inv, ps, s.chainOf(inv.ChainID).assets.list...)
		}
	}
	return out, nil
}

func (s *Service) handleQRPNG(w http.ResponseWriter, r *http.Request) {
	inv, ok := s.invoiceOf(w, r)
	if !ok {
		return
	}
	q, perr := httpapi.Query(r)
	if perr != nil {
		problem.Write(w, perr)
		return
	}
	size := s.cfg.QRSize
	for name, vals := range q {
		if name != "size" {
			problem.Write(w, problem.OfField(problem.CodeUnknownParameter, name, "unknown query parameter "+strconv.Quote(name)+" (allowed: size)"))
			return
		}
		n, err := strconv.Atoi(vals[0])
		if err != nil || len(vals) > 1 || n < minQRSize || n > maxQRSize {
			problem.Write(w, problem.OfField(problem.CodeInvalidParameter, "size",
				"size must be one integer from "+strconv.Itoa(minQRSize)+" to "+strconv.Itoa(maxQRSize)))
			return
		}
		size = n
	}
	png, err := QRPNG(inv.PaymentURI, size)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeImage(w, "image/png", png)
}

func (s *Service) handleQRSVG(w http.ResponseWriter, r *http.Request) {
	inv, ok := s.invoiceOf(w, r)
	if !ok {
		return
	}
	if q, perr := httpapi.Query(r); perr != nil || len(q) > 0 {
		problem.Write(w, cmp.Or(perr, problem.Of(problem.CodeUnknownParameter, "qr.svg takes no query parameters")))
		return
	}
	svg, err := QRSVG(inv.PaymentURI)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeImage(w, "image/svg+xml", svg)
}

// writeImage serves a QR code. The payment URI never changes, so the image
// may be cached, privately: it is behind the merchant's credential.
func writeImage(w http.ResponseWriter, contentType string, b []byte) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("Cache-Control", "private, max-age=86400")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// List pagination.
const (
	defaultListLimit = 20
	maxListLimit     = 100
	cursorPrefix     = "v1:"
)

// encodeCursor makes the opaque continuation token of a listing: the id of
// the last invoice returned. Filters are not in it: the client sends the
// same filters with the cursor.
func encodeCursor(lastID int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + strconv.FormatInt(lastID, 10)))
}

func decodeCursor(c string) (int64, bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || !strings.HasPrefix(string(b), cursorPrefix) {
		return 0, false
	}
	id, err := strconv.ParseInt(string(b[len(cursorPrefix):]), 10, 64)
	return id, err == nil && id > 0
}

var invoiceStatuses = []string{store.StatusPending, store.StatusPaid, store.StatusConfirmed, store.StatusSettled, store.StatusExpired}

// parseListQuery reads the query of GET /v1/invoices: status (repeated or
// comma-separated), created_after (inclusive) and created_before
// (exclusive) as RFC 3339 times, limit (1…100, default 20) and cursor.
// ListInvoices checks the values.
func parseListQuery(q map[string][]string) (InvoiceQuery, *problem.Problem) {
	var f InvoiceQuery
	one := func(name string) (string, *problem.Problem) {
		if len(q[name]) != 1 {
			return "", problem.OfField(problem.CodeInvalidParameter, name, name+" must be given once")
		}
		return q[name][0], nil
	}
	for name, vals := range q {
		switch name {
		case "status":
			for _, v := range vals {
				f.Statuses = append(f.Statuses, strings.Split(v, ",")...)
			}
		case "created_after", "created_before":
			v, perr := one(name)
			if perr != nil {
				return f, perr
			}
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return f, problem.OfField(problem.CodeInvalidParameter, name, name+" must be an RFC 3339 time, e.g. 2026-01-02T15:04:05Z")
			}
			if name == "created_after" {
				f.CreatedAfter = t
			} else {
				f.CreatedBefore = t
			}
		case "limit":
			v, perr := one(name)
			if perr != nil {
				return f, perr
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return f, problem.OfField(problem.CodeInvalidParameter, name, "limit must be an integer from 1 to "+strconv.Itoa(maxListLimit))
			}
			f.Limit = n
		case "cursor":
			v, perr := one(name)
			if perr != nil {
				return f, perr
			}
			if v == "" {
				return f, problem.OfField(problem.CodeInvalidCursor, name, "cursor is not one this API returned")
			}
			f.Cursor = v
		default:
			return f, problem.OfField(problem.CodeUnknownParameter, name,
				"unknown query parameter "+strconv.Quote(name)+" (allowed: status, created_after, created_before, limit, cursor)")
		}
	}
	return f, nil
}

func (s *Service) handleListInvoices(w http.ResponseWriter, r *http.Request) {
	q, perr := httpapi.Query(r)
	if perr != nil {
		problem.Write(w, perr)
		return
	}
	f, perr := parseListQuery(q)
	if perr != nil {
		problem.Write(w, perr)
		return
	}
	page, err := s.ListInvoices(r.Context(), principal(r).Merchant.ID, f)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}

// merchantView is the merchant profile (api.Merchant); api_key and
// webhook_secret appear only in the responses that create them.
type merchantView struct {
	api.Merchant
	APIKey        string `json:"api_key,omitempty"`
	WebhookSecret string `json:"webhook_secret,omitempty"`
}

// merchantJSON is a merchant's view without credentials.
func merchantJSON(m store.Merchant) merchantView { return merchantView{Merchant: api.NewMerchant(m)} }

func (s *Service) handleGetMerchant(w http.ResponseWriter, r *http.Request) {
	if m, ok := s.merchant(w, r); ok {
		writeJSON(w, http.StatusOK, merchantJSON(m))
	}
}

// parseMerchantBody reads name, webhook_url and settlement_address; absent
// or null members stay nil.
func parseMerchantBody(body []byte) (MerchantUpdate, *problem.Problem) {
	ms, perr := members(body, "name", "webhook_url", "settlement_address", "underpayment_tolerance")
	if perr != nil {
		return MerchantUpdate{}, perr
	}
	var u MerchantUpdate
	if raw := ms["underpayment_tolerance"]; !isNull(raw) {
		tol, perr := parseTolerance(raw)
		if perr != nil {
			return MerchantUpdate{}, perr
		}
		u.Tolerance = &tol
	}
	if raw := ms["name"]; !isNull(raw) {
		v, perr := stringMember(ms, "name", 200)
		if perr != nil {
			return MerchantUpdate{}, perr
		}
		u.Name = &v
	}
	if raw := ms["webhook_url"]; !isNull(raw) {
		v, perr := stringMember(ms, "webhook_url", 2048)
		if perr != nil {
			return MerchantUpdate{}, perr
		}
		u.WebhookURL = &v
	}
	if raw := ms["settlement_address"]; !isNull(raw) {
		a, perr := parseAddressMember("settlement_address", raw)
		if perr != nil {
			return MerchantUpdate{}, perr
		}
		u.SettlementAddress = &a
	}
	return u, nil
}

// readMerchantBody reads and parses a merchant create/update body,
// answering the problem itself when it is bad.
func (s *Service) readMerchantBody(w http.ResponseWriter, r *http.Request) (MerchantUpdate, bool) {
	if !httpapi.CheckJSON(w, r) {
		return MerchantUpdate{}, false
	}
	body, perr := readBody(w, r, s.cfg.MaxBodyBytes)
	if perr == nil {
		var u MerchantUpdate
		if u, perr = parseMerchantBody(body); perr == nil {
			return u, true
		}
	}
	problem.Write(w, perr)
	return MerchantUpdate{}, false
}

func (s *Service) handleUpdateMerchant(w http.ResponseWriter, r *http.Request) {
	m, ok := s.merchant(w, r)
	if !ok {
		return
	}
	u, ok := s.readMerchantBody(w, r)
	if !ok {
		return
	}
	if u.SettlementAddress != nil && principal(r).KeyID != 0 {
		problem.Write(w, problem.OfField(problem.CodeInsufficientScope, "settlement_address",
			"only the merchant's own API key may change the settlement address (where every sweep sends the money); a scoped key, admin included, may not"))
		return
	}
	updated, err := s.UpdateMerchant(r.Context(), m.ID, u)
	if errors.Is(err, ErrInvalidMerchant) {
		problem.Write(w, merchantError(err))
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, merchantJSON(updated))
}

func (s *Service) handleRotateAPIKey(w http.ResponseWriter, r *http.Request) {
	m, ok := s.merchant(w, r)
	if !ok {
		return
	}
	s.rotateAPIKey(w, r, m.ID, m.APIKeyDigest)
}

// rotateAPIKey answers a rotation of merchant id's key; current is the
// digest of the key the merchant authenticated with (nil for the
// operator), which must still be current under the row lock: of
// concurrent rotations with one key, one succeeds and the others get 401.
func (s *Service) rotateAPIKey(w http.ResponseWriter, r *http.Request, id int64, current []byte) {
	updated, key, err := s.rotateAPIKeyFrom(r.Context(), id, current)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "api key rotated", slog.Int64("merchant_id", id))
	writeJSON(w, http.StatusOK, merchantView{Merchant: api.NewMerchant(updated), APIKey: key})
}

func (s *Service) handleRotateWebhookSecret(w http.ResponseWriter, r *http.Request) {
	m, ok := s.merchant(w, r)
	if !ok {
		return
	}
	updated, secret, err := s.RotateWebhookSecret(r.Context(), m.ID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "webhook secret rotated", slog.Int64("merchant_id", m.ID))
	writeJSON(w, http.StatusOK, merchantView{Merchant: api.NewMerchant(updated), WebhookSecret: secret})
}

// operator checks the admin bearer token in constant time. With no
// AdminToken configured the admin API refuses everyone.
func (s *Service) operator(w http.ResponseWriter, r *http.Request) bool {
	if httpapi.OperatorAuthorized(r, s.cfg.AdminToken) {
		return true
	}
	problem.Write(w, errUnauthorized)
	return false
}

func (s *Service) handleAdminCreateMerchant(w http.ResponseWriter, r *http.Request) {
	if !s.operator(w, r) {
		return
	}
	u, ok := s.readMerchantBody(w, r)
	if !ok {
		return
	}
	if u.SettlementAddress == nil {
		problem.Write(w, problem.OfField(problem.CodeMissingField, "settlement_address", "settlement_address is required"))
		return
	}
	p := MerchantParams{SettlementAddress: *u.SettlementAddress}
	if u.Tolerance != nil {
		p.Tolerance = *u.Tolerance
	}
	if u.Name != nil {
		p.Name = *u.Name
	}
	if u.WebhookURL != nil {
		p.WebhookURL = *u.WebhookURL
	}
	created, err := s.CreateMerchant(r.Context(), p)
	if errors.Is(err, ErrInvalidMerchant) {
		problem.Write(w, merchantError(err))
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "merchant created", slog.Int64("merchant_id", created.Merchant.ID))
	w.Header().Set("Location", s.cfg.BaseURL+"/v1/admin/merchants/"+strconv.FormatInt(created.Merchant.ID, 10))
	writeJSON(w, http.StatusCreated, merchantView{Merchant: api.NewMerchant(created.Merchant), APIKey: created.APIKey,
		WebhookSecret: created.WebhookSecret})
}

// handleAdminGetMerchant is the merchant an operator created (the Location
// of POST /v1/admin/merchants), without credentials.
func (s *Service) handleAdminGetMerchant(w http.ResponseWriter, r *http.Request) {
	if !s.operator(w, r) {
		return
	}
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		problem.Write(w, errNotFound)
		return
	}
	m, err := s.st.GetMerchant(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, merchantJSON(m))
}

func (s *Service) handleAdminRotateAPIKey(w http.ResponseWriter, r *http.Request) {
	if !s.operator(w, r) {
		return
	}
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		problem.Write(w, errNotFound)
		return
	}
	s.rotateAPIKey(w, r, id, nil)
}

// publicInvoice is what a payer sees of a native-coin invoice through a
// lookup token: what the checkout page shows (see publicPayer) and nothing
// the merchant keeps to itself (no metadata, ids, merchant settings or
// sweep data).
type publicInvoice struct {
	Status         string                `json:"status"`
	AmountWei      store.Amount          `json:"amount_wei"`
	PaidWei        store.Amount          `json:"paid_wei"`
	ChainID        uint64                `json:"chain_id"`
	DepositAddress store.ChecksumAddress `json:"deposit_address"`
	PaymentURI     string                `json:"payment_uri"`
	ExpiresAt      time.Time             `json:"expires_at"`
	// RemainingWei is what is still due (0 once paid in full).
	RemainingWei store.Amount `json:"remaining_wei"`
	publicPayer
}

// publicPayer is what every public read carries for the checkout page,
// whatever the asset: the merchant's name, the description and order id
// the merchant wrote for the payer, the confirmations, where to return.
type publicPayer struct {
	MerchantName string `json:"merchant_name"`
	Description  string `json:"description"`
	OrderID      string `json:"order_id"`
	RedirectURL  string `json:"redirect_url,omitempty"`
	// RemainingPaymentURI is the payment URI for exactly what is still due,
	// present while something remains.
	RemainingPaymentURI string `json:"remaining_payment_uri,omitempty"`
	Underpaid           bool   `json:"underpaid"`
	Overpaid            bool   `json:"overpaid"`
	PaidLate            bool   `json:"paid_late"`
	// Confirmations counts the blocks on top of the latest payment's block,
	// at most ConfirmationsRequired (which it equals once CONFIRMED).
	Confirmations         int `json:"confirmations"`
	ConfirmationsRequired int `json:"confirmations_required"`
	// DelayedChains are the chains of the invoice's payment options whose
	// parts stopped (Config.ChainStopped): a payment sent on one is safe
	// and is credited once they run again, but shows only then.
	DelayedChains []uint64 `json:"delayed_chains,omitempty"`
	publicReceipt
	// The price, what was paid and remains in fiat, and every accepted
	// asset of an invoice priced in a fiat currency (absent otherwise).
	*publicFiat
}

// lookupInvoice finds the invoice of the request's bearer lookup token,
// writing the problem when there is none.
// A client address that failed too many lookups gets 429 with
// Retry-After (Config.PublicLookups), before any database read.
func (s *Service) lookupInvoice(w http.ResponseWriter, r *http.Request) (store.Invoice, bool) {
	now := s.cfg.Now()
	if wait, blocked := s.lookups.blocked(r, now); blocked {
		w.Header().Set("Retry-After", retryAfter(wait))
		problem.Write(w, errTooManyLookups)
		return store.Invoice{}, false
	}
	tok, ok := httpapi.BearerToken(r)
	if !ok || !wellFormedLookupToken(tok) {
		s.lookups.failed(r, now)
		problem.Write(w, errUnauthorized)
		return store.Invoice{}, false
	}
	inv, err := s.st.GetInvoiceByLookupTokenHash(r.Context(), LookupTokenHash(tok))
	if errors.Is(err, store.ErrNotFound) {
		s.lookups.failed(r, now)
		problem.Write(w, errUnauthorized)
		return store.Invoice{}, false
	}
	if err != nil {
		s.fail(w, r, err)
		return store.Invoice{}, false
	}
	return inv, true
}

// remaining is what is still due on inv in its asset, and the payment URI
// for exactly that ("" when nothing remains); for a fiat invoice (ps its
// counted payments) what remains in its first quote's asset, and the
// fiat view of every accepted asset.
func (s *Service) remaining(inv store.Invoice, ps []store.Payment) (store.Amount, string, *publicFiat, error) {
	if inv.IsFiat() {
		pf, err := s.publicFiatOf(inv, ps)
		if err != nil {
			return store.Amount{}, "", nil, err
		}
		return pf.Quotes[0].Remaining, pf.Quotes[0].PaymentURI, pf, nil
	}
	rest, uri, err := s.remainingInAsset(inv)
	return rest, uri, nil, err
}

func (s *Service) remainingInAsset(inv store.Invoice) (store.Amount, string, error) {
	if inv.PaidWei.Cmp(inv.AmountWei) >= 0 {
		return store.Amount{}, "", nil
	}
	rest := new(uint256.Int).Sub(inv.AmountWei.Uint256(), inv.PaidWei.Uint256())
	if inv.PaidWei.IsZero() {
		return inv.AmountWei, inv.PaymentURI, nil
	}
	if inv.IsToken() {
		uri, err := FormatTransferURI(TransferURI{Token: *inv.TokenAddress, ChainID: inv.ChainID, To: inv.DepositAddress, Amount: rest})
		return store.AmountFromUint256(rest), uri, err
	}
	uri, err := FormatPaymentURI(PaymentURI{Address: inv.DepositAddress, ChainID: inv.ChainID, Value: rest})
	return store.AmountFromUint256(rest), uri, err
}

// confirmations counts the blocks indexed on top of the block of the
// latest of inv's payments ps, capped at the threshold. Under finality
// "instant" and "tag" the threshold is 0 (Config.Confirmations): both
// numbers are 0, and the status tells when the payment is final. The
// blocks are counted on the invoice's chain.
func (s *Service) confirmations(ctx context.Context, inv store.Invoice, ps []store.Payment) (int, error) {
	c := s.chainOf(inv.ChainID)
	need := c.confirmations
	switch {
	case inv.Status == store.StatusConfirmed || inv.Status == store.StatusSettled:
		return need, nil
	case len(ps) == 0:
		return 0, nil
	}
	var last uint64
	for _, p := range ps {
		last = max(last, p.BlockNumber)
	}
	head, err := c.st.LatestBlock(ctx)
	if errors.Is(err, store.ErrNotFound) || err == nil && head.Number <= last {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return int(min(head.Number-last, uint64(need))), nil
}

func (s *Service) handlePublicInvoice(w http.ResponseWriter, r *http.Request) {
	inv, ok := s.lookupInvoice(w, r)
	if !ok {
		return
	}
	m, err := s.st.GetMerchant(r.Context(), inv.MerchantID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ps, err := s.payments(r.Context(), inv)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	rest, restURI, pf, err := s.remaining(inv, ps)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	conf, err := s.confirmations(r.Context(), inv, ps)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, publicView(inv, rest, publicPayer{
		MerchantName: m.Name, Description: inv.Description, OrderID: inv.OrderID, RedirectURL: inv.RedirectURL,
		RemainingPaymentURI: restURI, Underpaid: inv.Underpaid, Overpaid: inv.Overpaid, PaidLate: inv.PaidLate,
		Confirmations: conf, ConfirmationsRequired: s.chainOf(inv.ChainID).confirmations, publicReceipt: receiptOf(inv, ps),
		publicFiat: pf, DelayedChains: s.delayedChains(inv, pf),
	}))
}

// delayedChains are the chains of inv's payment options — its chain and
// its quotes' (pf) — whose parts stopped (Config.ChainStopped), in
// ascending order; nil when none did. Invoices opened before the stop
// keep their addresses: what is paid meanwhile is indexed, and credited,
// once the chain runs again, and the checkout page tells the payer so.
func (s *Service) delayedChains(inv store.Invoice, pf *publicFiat) []uint64 {
	if s.cfg.ChainStopped == nil {
		return nil
	}
	ids := []uint64{inv.ChainID}
	if pf != nil {
		for _, q := range pf.Quotes {
			ids = append(ids, q.ChainID)
		}
	}
	slices.Sort(ids)
	var out []uint64
	for _, id := range slices.Compact(ids) {
		if s.cfg.ChainStopped(id) != nil {
			out = append(out, id)
		}
	}
	return out
}

// handlePublicQRSVG serves the QR code of what the payer should pay now:
// the remaining_payment_uri while something remains, else the payment_uri;
// for a fiat invoice, in the asset ?asset= names (symbol or token address;
// the first quote's without it). It is private to the token holder and
// changes with payments: not cached.
func (s *Service) handlePublicQRSVG(w http.ResponseWriter, r *http.Request) {
	inv, ok := s.lookupInvoice(w, r)
	if !ok {
		return
	}
	var (
		assetName string
		chainID   uint64
	)
	if inv.IsFiat() {
		q, perr := httpapi.Query(r)
		if perr != nil {
			problem.Write(w, perr)
			return
		}
		for name, vals := range q {
			if (name != "asset" && name != "chain_id") || len(vals) != 1 {
				problem.Write(w, problem.OfField(problem.CodeUnknownParameter, name,
					"qr.svg takes two parameters, asset and chain_id (when the quotes span chains), each once"))
				return
			}
			if name == "asset" {
				assetName = vals[0]
				continue
			}
			var err error
			if chainID, err = strconv.ParseUint(vals[0], 10, 64); err != nil || chainID == 0 {
				problem.Write(w, problem.OfField(problem.CodeInvalidParameter, "chain_id", "chain_id must be a chain id, e.g. 9000"))
				return
			}
		}
		if chainID != 0 && assetName == "" {
			problem.Write(w, problem.OfField(problem.CodeInvalidParameter, "chain_id", "chain_id goes with asset: name the quoted asset on that chain"))
			return
		}
	}
	// What remains follows from the invoice alone (paid_wei, paid_value):
	// the QR reads no payments.
	_, uri, pf, err := s.remaining(inv, nil)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	fallback := inv.PaymentURI
	if assetName != "" {
		quote, ok := quoteOf(inv, assetName, chainID)
		if !ok {
			problem.Write(w, problem.OfField(problem.CodeInvalidParameter, "asset", "asset must name one of the invoice's quoted assets (on chain_id, when given)"))
			return
		}
		for _, pq := range pf.Quotes {
			if pq.Asset.Same(quote.Asset) && pq.ChainID == quote.ChainOf(inv.ChainID) {
				uri = pq.PaymentURI
			}
		}
		fallback = quote.PaymentURI
	}
	svg, err := QRSVG(cmp.Or(uri, fallback))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "image/svg+xml")
	h.Set("Content-Length", strconv.Itoa(len(svg)))
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(svg)
}

func (s *Service) handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "public, max-age=300")
	writeBody(w, http.StatusOK, s.openapi)
}
