package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Standard Webhooks headers (https://www.standardwebhooks.com).
const (
	// HeaderID carries the event id ("evt_123"): the same on every attempt
	// and every replay of an event, so receivers deduplicate on it.
	HeaderID = "webhook-id"
	// HeaderTimestamp carries the attempt's time in Unix seconds.
	HeaderTimestamp = "webhook-timestamp"
	// HeaderSignature carries space-separated signatures "v1,<base64>".
	HeaderSignature = "webhook-signature"
)

// SecretPrefix starts a webhook secret; the standard base64 of the HMAC
// key follows.
const SecretPrefix = "whsec_"

// DefaultTolerance is how far a webhook-timestamp may be from the
// receiver's clock, either way, when Verify is given no tolerance.
const DefaultTolerance = 5 * time.Minute

// Errors of Verify and Sign. They never contain the secret.
var (
	ErrInvalidSecret       = errors.New("webhook: the secret is not whsec_ followed by standard base64")
	ErrMissingHeaders      = errors.New("webhook: missing webhook-id, webhook-timestamp or webhook-signature header")
	ErrInvalidTimestamp    = errors.New("webhook: webhook-timestamp is not a Unix time in seconds")
	ErrTimestampTooOld     = errors.New("webhook: webhook-timestamp is older than the tolerance")
	ErrTimestampTooNew     = errors.New("webhook: webhook-timestamp is further in the future than the tolerance")
	ErrNoMatchingSignature = errors.New("webhook: no v1 signature matches")
)

// decodeSecret returns the HMAC key of a secret: the base64-decoded part
// after the optional "whsec_" prefix.
func decodeSecret(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, SecretPrefix))
	if err != nil || len(key) == 0 {
		return nil, ErrInvalidSecret
	}
	return key, nil
}

// Sign returns the webhook-signature value "v1,<base64 HMAC-SHA256>" of a
// message: the HMAC, keyed with the decoded secret, of
// "<id>.<unix seconds>.<body>".
func Sign(secret, id string, ts time.Time, body []byte) (string, error) {
	key, err := decodeSecret(secret)
	if err != nil {
		return "", err
	}
	return "v1," + base64.StdEncoding.EncodeToString(mac(key, id, ts.Unix(), body)), nil
}

func mac(key []byte, id string, ts int64, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	var buf [20]byte
	h.Write([]byte(id))
	h.Write([]byte{'.'})
	h.Write(strconv.AppendInt(buf[:0], ts, 10))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Verify checks a received webhook: that headers carry a webhook-id, a
// webhook-timestamp within tolerance of now (either way; DefaultTolerance
// when tolerance ≤ 0), and a "v1" signature of the body under secret among
// the space-separated ones in webhook-signature. Signatures are compared in
// constant time. Pass the body exactly as received, before any parsing.
//
// A nil error means the webhook comes from the holder of the secret; it
// may still be a retry or a replay of one already processed: deduplicate
// on the webhook-id header.
func Verify(secret string, headers http.Header, body []byte, tolerance time.Duration, now time.Time) error {
	v, err := NewVerifier(secret)
	if err != nil {
		return err
	}
	v.Tolerance = tolerance
	v.Now = func() time.Time { return now }
	return v.Verify(headers, body)
}

// Verifier verifies webhooks signed with one secret, decoding the secret
// once. It is safe for concurrent use once configured.
type Verifier struct {
	key []byte
	// Tolerance is how far the webhook-timestamp may be from Now, either
	// way. Defaults to DefaultTolerance.
	Tolerance time.Duration
	// Now is the receiver's clock. Defaults to time.Now.
	Now func() time.Time
}

// NewVerifier returns a Verifier for secret ("whsec_…").
func NewVerifier(secret string) (*Verifier, error) {
	key, err := decodeSecret(secret)
	if err != nil {
		return nil, err
	}
	return &Verifier{key: key}, nil
}

// String does not print the key.
func (v *Verifier) String() string { return "webhook.Verifier{key: redacted}" }

// Verify is the package function Verify with v's secret, tolerance and
// clock.
func (v *Verifier) Verify(headers http.Header, body []byte) error {
	id := headers.Get(HeaderID)
	tsText := headers.Get(HeaderTimestamp)
	sigs := strings.Join(headers.Values(HeaderSignature), " ")
	if id == "" || tsText == "" || sigs == "" {
		return ErrMissingHeaders
	}
	ts, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil {
		return ErrInvalidTimestamp
	}
	tolerance := v.Tolerance
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	now := time.Now()
	if v.Now != nil {
		now = v.Now()
	}
	sent := time.Unix(ts, 0)
	if now.Sub(sent) > tolerance {
		return ErrTimestampTooOld
	}
	if sent.Sub(now) > tolerance {
		return ErrTimestampTooNew
	}
	want := mac(v.key, id, ts, body)
	var buf [2 * sha256.Size]byte
	for _, s := range strings.Fields(sigs) {
		version, sig, ok := strings.Cut(s, ",")
		if !ok || version != "v1" || base64.StdEncoding.DecodedLen(len(sig)) > len(buf) {
			continue
		}
		n, err := base64.StdEncoding.Decode(buf[:], []byte(sig))
		if err == nil && hmac.Equal(buf[:n], want) {
			return nil
		}
	}
	return ErrNoMatchingSignature
}
