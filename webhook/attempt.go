package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/evmpay/evmpay/store"
)

// Payload is the JSON body of every webhook.
type Payload struct {
	// ID is the event id ("evt_123"), also sent as webhook-id.
	ID string `json:"id"`
	// Type is the event type, such as "invoice.paid".
	Type string `json:"type"`
	// CreatedAt is when the state change happened.
	CreatedAt time.Time `json:"created_at"`
	// Data is what the event is about as the merchant API shows it, at
	// that moment: the invoice (invoice.*), the refund or payout
	// (refund.*, payout.*: store/api.Outbound), or the settlement-address
	// change (merchant.settlement_address_changed:
	// store/api.SettlementAddressChange).
	Data json.RawMessage `json:"data"`
}

// Body returns the webhook body of an event. It is the same bytes on every
// attempt.
func Body(e store.Event) ([]byte, error) {
	if !json.Valid(e.Data) {
		return nil, errors.New("webhook: event data is not JSON")
	}
	return json.Marshal(Payload{ID: EventID(e.ID), Type: e.Type, CreatedAt: e.CreatedAt.UTC(), Data: json.RawMessage(e.Data)})
}

// result is what an attempt came to.
type result struct {
	outcome string // outcome* constant; "" when no attempt was made
	status  *int   // the response status; nil on a timeout or network error
	// unreachable: a timeout or a network error (the endpoint gets one
	// request at a time until it answers).
	unreachable bool
	retryAfter  time.Duration // asked for by a 429 or 503
	lastError   string        // what the merchant sees: a neutral class
	detail      string        // the cause in full, for the operator log only
}

// notSentError is the last_error of an attempt not sent because the
// endpoint is down.
const notSentError = "not sent: the endpoint is down (an attempt to it timed out or could not connect); retrying on the ladder"

// dbTimeout bounds the database work of an attempt (renewing the lease,
// recording the result), so that Run returns even when the database hangs.
const dbTimeout = 30 * time.Second

// maxErrorLen bounds last_error.
const maxErrorLen = 200

// attempt makes one attempt at a claimed delivery and records it. sent,
// when not nil, is called with the result once the request is over and
// before it is recorded, so that the endpoint's slot is free while the
// database writes.
func (d *Dispatcher) attempt(ctx context.Context, j *job, sent func(result)) result {
	log := d.log.With(slog.Int64("delivery_id", j.d.ID), slog.String("event_id", EventID(j.d.EventID)),
		slog.Int64("merchant_id", j.d.MerchantID))
	start := d.cfg.Now()
	if j.lease.Sub(start) < d.cfg.Timeout+leaseMargin {
		rctx, cancel := context.WithTimeout(ctx, dbTimeout)
		lease, err := d.st.RenewDeliveryLease(rctx, j.d.ID, j.lease, start.Add(d.cfg.Lease))
		cancel()
		if err != nil {
			// Lost (another dispatcher took it over) or not renewable now:
			// either way not ours to send; it is retried when due.
			log.WarnContext(ctx, "webhook: could not renew the lease before the attempt; skipping it", slog.Any("error", err))
			if sent != nil {
				sent(result{})
			}
			return result{}
		}
		j.lease = lease
	}

	var res result
	if j.notSent {
		res = result{outcome: outcomeRetry, lastError: notSentError}
	} else {
		res = d.send(ctx, j, start, log)
	}
	if sent != nil {
		sent(res)
	}
	end := d.cfg.Now()
	rec := d.next(j.d, res, start, end)
	if res.detail != "" {
		// The cause in full is for the operator only (last_error holds
		// its class).
		log = log.With(slog.String("detail", res.detail))
	}
	res.outcome = outcomeOf(rec, res)
	switch res.outcome {
	case outcomeDelivered:
		d.met.delivered.Inc()
		if !j.event.CreatedAt.IsZero() {
			d.met.delay.Observe(end.Sub(j.event.CreatedAt).Seconds())
		}
	case outcomeRetry:
		d.met.retry.Inc()
		level := slog.LevelInfo
		if j.notSent {
			level = slog.LevelDebug // one line per delivery of a dead endpoint's backlog is noise
		}
		log.Log(ctx, level, "webhook: attempt failed; retry scheduled", slog.Int("attempt", rec.Attempt),
			slog.String("last_error", rec.LastError), slog.Time("next_attempt_at", *rec.NextAttemptAt))
	case outcomeFailed:
		d.met.failed.Inc()
		log.InfoContext(ctx, "webhook: attempt failed; no automatic retry", slog.Int("attempt", rec.Attempt),
			slog.String("last_error", rec.LastError))
	case outcomeExhausted:
		d.met.exhausted.Inc()
		log.WarnContext(ctx, "webhook: final attempt failed; delivery permanently failed", slog.Int("attempt", rec.Attempt),
			slog.String("last_error", rec.LastError))
	}
	d.record(ctx, j, rec, log)
	return res
}

// Retrying the recording of an attempt: the first wait, the longest, and
// the part of the lease kept free at the end (so that no other dispatcher
// can have taken the delivery over when a retry lands).
const (
	recordBackoff    = 100 * time.Millisecond
	recordBackoffMax = 2 * time.Second
	recordMargin     = 5 * time.Second
)

// record writes an attempt's result. When the database is briefly
// unavailable it tries again, with a bounded backoff, while the lease
// still holds the delivery (and until Run is stopped): an acknowledged
// webhook is then not sent again when the lease expires. A lost lease
// (store.ErrConflict) ends it at once.
func (d *Dispatcher) record(ctx context.Context, j *job, rec store.Delivery, log *slog.Logger) {
	d.mu.Lock()
	stop := d.runCtx
	d.mu.Unlock()
	if stop == nil {
		stop = ctx
	}
	// The lease is on the dispatcher's clock (Config.Now); the waits are
	// real time: keep to what is left of the lease now.
	deadline := time.Now().Add(j.lease.Sub(d.cfg.Now()) - recordMargin)
	wait := recordBackoff
	for try := 1; ; try++ {
		rctx, cancel := context.WithTimeout(ctx, dbTimeout)
		err := d.rec.record(rctx, rec, j.lease)
		cancel()
		if err == nil {
			if try > 1 {
				log.InfoContext(ctx, "webhook: attempt recorded after retrying", slog.Int("attempt", rec.Attempt), slog.Int("tries", try))
			}
			return
		}
		if errors.Is(err, store.ErrConflict) {
			// Lost (or, after an answer that never arrived, already
			// written): either way nothing more to do here.
			log.WarnContext(ctx, "webhook: recording an attempt: the lease is no longer held", slog.Int("attempt", rec.Attempt),
				slog.Int("tries", try), slog.Any("error", err))
			return
		}
		if time.Now().Add(wait).After(deadline) || stop.Err() != nil {
			// The webhook may have been sent: it is sent again once the
			// lease expires (at least once; the receiver deduplicates on
			// webhook-id).
			log.ErrorContext(ctx, "webhook: recording an attempt failed; it will be repeated when the lease expires",
				slog.Int("attempt", rec.Attempt), slog.Int("tries", try), slog.Any("error", err))
			return
		}
		log.WarnContext(ctx, "webhook: recording an attempt failed; retrying within the lease", slog.Int("attempt", rec.Attempt),
			slog.Int("tries", try), slog.Duration("wait", wait), slog.Any("error", err))
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-stop.Done():
			t.Stop()
		}
		wait = min(2*wait, recordBackoffMax)
	}
}

func outcomeOf(rec store.Delivery, res result) string {
	switch {
	case rec.Status == store.DeliveryDelivered:
		return outcomeDelivered
	case rec.Status == store.DeliveryPending:
		return outcomeRetry
	case res.permanent():
		return outcomeFailed
	default:
		return outcomeExhausted
	}
}

// permanent reports a failure that is not retried automatically.
func (r result) permanent() bool { return r.outcome == outcomeFailed }

// next returns the delivery as the attempt leaves it.
func (d *Dispatcher) next(del store.Delivery, res result, start, end time.Time) store.Delivery {
	del.Attempt++
	del.LastAttemptAt = &start
	del.ResponseStatus = res.status
	del.LastError = res.lastError
	del.UpdatedAt = end
	del.NextAttemptAt = nil
	del.Delivered = false
	switch {
	case res.outcome == outcomeDelivered:
		del.Status = store.DeliveryDelivered
		del.Delivered = true
		del.LastError = ""
	case res.outcome == outcomeFailed, del.Attempt >= d.cfg.MaxAttempts:
		del.Status = store.DeliveryFailed
	default:
		del.Status = store.DeliveryPending
		at := end.Add(d.delay(del.Attempt, res.retryAfter))
		del.NextAttemptAt = &at
	}
	return del
}

// delay is the wait after failed attempt number attempt: the ladder's rung
// plus jitter, or what the receiver asked for with Retry-After when that is
// longer (capped at MaxRetryAfter). Never shorter than the ladder.
func (d *Dispatcher) delay(attempt int, retryAfter time.Duration) time.Duration {
	rung := d.cfg.Schedule[min(attempt, len(d.cfg.Schedule)-1)]
	if d.cfg.Jitter > 0 && rung > 0 {
		rung += time.Duration(rand.Float64() * d.cfg.Jitter * float64(rung))
	}
	return max(rung, min(retryAfter, d.cfg.MaxRetryAfter))
}

// send makes the HTTP request of an attempt and classifies the answer.
// res.outcome is outcomeDelivered, outcomeFailed (no automatic retry) or
// outcomeRetry.
func (d *Dispatcher) send(ctx context.Context, j *job, now time.Time, log *slog.Logger) result {
	fail := func(msg string) result { return result{outcome: outcomeFailed, lastError: msg} }
	retry := func(msg string) result { return result{outcome: outcomeRetry, lastError: msg} }
	if j.missing != "" {
		return fail(j.missing)
	}
	m := j.merchant
	if m.DisabledAt != nil {
		return fail("merchant is disabled")
	}
	if m.WebhookURL == "" {
		return fail("merchant has no webhook_url")
	}
	u, err := url.Parse(m.WebhookURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fail("webhook_url is not an absolute http or https URL")
	}
	secret, err := d.secrets.WebhookSecret(m)
	if err != nil {
		log.ErrorContext(ctx, "webhook: opening the merchant's webhook secret", slog.Any("error", err))
		return retry("webhook secret unavailable")
	}
	key, err := decodeSecret(secret)
	if err != nil {
		log.ErrorContext(ctx, "webhook: the merchant's webhook secret is malformed")
		return retry("webhook secret unavailable")
	}
	body, err := Body(j.event)
	if err != nil {
		return fail("event data is not JSON")
	}
	id := EventID(j.event.ID)
	ts := now.Unix()

	rctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return fail("webhook_url is not an absolute http or https URL")
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", d.cfg.UserAgent)
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	h.Set(HeaderSignature, "v1,"+base64.StdEncoding.EncodeToString(mac(key, id, ts, body)))

	sent := time.Now()
	resp, err := d.client.Do(req)
	if err != nil {
		d.met.duration.Observe(time.Since(sent).Seconds())
		return d.networkFailure(err, u.Hostname())
	}
	// Read a little of the body so that the connection can be reused; the
	// body itself is never stored.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, d.cfg.MaxResponseBytes))
	_ = resp.Body.Close()
	d.met.duration.Observe(time.Since(sent).Seconds())

	code := resp.StatusCode
	res := result{status: &code, lastError: "HTTP " + strconv.Itoa(code)}
	switch {
	case code >= 200 && code < 300:
		res.outcome = outcomeDelivered
	case code == http.StatusRequestTimeout, code == http.StatusTooManyRequests, code >= 500, code < 200:
		res.outcome = outcomeRetry
		if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
			res.retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), now)
		}
	case code >= 300 && code < 400:
		res.outcome = outcomeFailed
		res.lastError += " (redirects are not followed)"
	default: // other 4xx: the endpoint refuses this webhook; retrying will not help
		res.outcome = outcomeFailed
	}
	return res
}

// Neutral classes of a request that got no response, as merchants see
// them in last_error. The cause in full (resolver addresses, internal host
// names) goes to the operator log only.
const (
	// errNoPublicHost: the name does not resolve, or resolves only to
	// addresses BlockPrivateNetworks refuses. One class for both, so that
	// a merchant cannot tell which internal names exist.
	errNoPublicHost = "connection failed: host not found or not a public address"
	// errPrivateLiteral: the URL's host is an address literal that
	// BlockPrivateNetworks refuses.
	errPrivateLiteral = "refused: not a public address"
	errConnect        = "connection failed"
	errTLS            = "connection failed: TLS handshake"
)

// networkFailure classifies a request that got no response. A host given
// as a private address literal fails without retry; everything else is
// retried on the ladder (a name resolving to a private address too: it is
// indistinguishable from a name that does not resolve, on purpose).
func (d *Dispatcher) networkFailure(err error, host string) result {
	// url.Error carries the whole URL, which may hold credentials: keep
	// only the cause.
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	detail := err.Error()
	if len(detail) > 4*maxErrorLen {
		detail = strings.ToValidUTF8(detail[:4*maxErrorLen], "")
	}
	res := result{outcome: outcomeRetry, unreachable: true, detail: detail}
	var dnsErr *net.DNSError
	var netErr net.Error
	switch {
	case errors.Is(err, errBlockedDestination) && isAddrLiteral(host):
		res.outcome, res.unreachable, res.lastError = outcomeFailed, false, errPrivateLiteral
	case errors.Is(err, errBlockedDestination), errors.As(err, &dnsErr):
		res.lastError = errNoPublicHost
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		res.lastError = fmt.Sprintf("timeout after %s", d.cfg.Timeout)
	case isTLSError(err):
		res.lastError = errTLS
	default:
		res.lastError = errConnect
	}
	return res
}

// isAddrLiteral reports whether a URL host (no port) is an IP address.
func isAddrLiteral(host string) bool {
	_, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil
}

func isTLSError(err error) bool {
	var (
		verify   *tls.CertificateVerificationError
		header   tls.RecordHeaderError
		alert    tls.AlertError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
	)
	return errors.As(err, &verify) || errors.As(err, &header) || errors.As(err, &alert) ||
		errors.As(err, &unknown) || errors.As(err, &hostname) || errors.As(err, &invalid)
}

// parseRetryAfter reads a Retry-After value: delay seconds or an HTTP date.
// It returns 0 when the value is missing, malformed or in the past.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		return time.Duration(min(secs, int64(365*24*time.Hour/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
