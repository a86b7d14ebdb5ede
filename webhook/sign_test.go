package webhook_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/webhook"
)

// The published Standard Webhooks test vector, from TestWebhookSign in
// github.com/standard-webhooks/standard-webhooks, libraries/go/webhook_test.go.
const (
	vectorSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorTimestamp = 1614265330
	vectorPayload   = `{"test": 2432232314}`
	vectorSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func vectorHeaders(sig string) http.Header {
	h := http.Header{}
	h.Set(webhook.HeaderID, vectorID)
	h.Set(webhook.HeaderTimestamp, strconv.Itoa(vectorTimestamp))
	h.Set(webhook.HeaderSignature, sig)
	return h
}

var vectorTime = time.Unix(vectorTimestamp, 0)

func TestSign_StandardWebhooksTestVector(t *testing.T) {
	sig, err := webhook.Sign(vectorSecret, vectorID, vectorTime, []byte(vectorPayload))
	require.NoError(t, err)
	require.Equal(t, vectorSignature, sig)
	sig, err = webhook.Sign(strings.TrimPrefix(vectorSecret, "whsec_"), vectorID, vectorTime, []byte(vectorPayload))
	require.NoError(t, err)
	require.Equal(t, vectorSignature, sig, "the whsec_ prefix is optional")
}

func TestVerify_StandardWebhooksTestVector(t *testing.T) {
	require.NoError(t, webhook.Verify(vectorSecret, vectorHeaders(vectorSignature), []byte(vectorPayload), 0, vectorTime))
}

func TestVerify_AnyOfSeveralSignatures(t *testing.T) {
	other := "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc="
	for _, sigs := range []string{
		other + " " + vectorSignature,
		vectorSignature + " " + other,
		"v2,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE= " + vectorSignature + " v1a,xyz",
		"  " + vectorSignature + "  ",
	} {
		require.NoError(t, webhook.Verify(vectorSecret, vectorHeaders(sigs), []byte(vectorPayload), 0, vectorTime), sigs)
	}
	h := vectorHeaders(other)
	h.Add(webhook.HeaderSignature, vectorSignature)
	require.NoError(t, webhook.Verify(vectorSecret, h, []byte(vectorPayload), 0, vectorTime), "repeated header")
}

func TestVerify_RejectsTampering(t *testing.T) {
	body := []byte(vectorPayload)
	require.ErrorIs(t, webhook.Verify(vectorSecret, vectorHeaders(vectorSignature), []byte(`{"test": 2432232315}`), 0, vectorTime),
		webhook.ErrNoMatchingSignature, "changed body")
	h := vectorHeaders(vectorSignature)
	h.Set(webhook.HeaderID, "msg_other")
	require.ErrorIs(t, webhook.Verify(vectorSecret, h, body, 0, vectorTime), webhook.ErrNoMatchingSignature, "changed id")
	h = vectorHeaders(vectorSignature)
	h.Set(webhook.HeaderTimestamp, strconv.Itoa(vectorTimestamp+1))
	require.ErrorIs(t, webhook.Verify(vectorSecret, h, body, 0, vectorTime), webhook.ErrNoMatchingSignature, "changed timestamp")
	for _, sig := range []string{
		"v2,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", // right MAC, wrong version
		"g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",    // no version
		"v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE",  // not base64
		"v1,g0hM9SsE",                     // truncated
		"v1," + strings.Repeat("A", 4000), // long
		"v1,",
	} {
		require.ErrorIs(t, webhook.Verify(vectorSecret, vectorHeaders(sig), body, 0, vectorTime), webhook.ErrNoMatchingSignature, sig)
	}
	require.ErrorIs(t, webhook.Verify("whsec_"+strings.Repeat("A", 44), vectorHeaders(vectorSignature), body, 0, vectorTime),
		webhook.ErrNoMatchingSignature, "another secret")
}

func TestVerify_TimestampTolerance(t *testing.T) {
	body := []byte(vectorPayload)
	h := vectorHeaders(vectorSignature)
	check := func(now time.Time, tol time.Duration) error {
		return webhook.Verify(vectorSecret, h, body, tol, now)
	}
	require.NoError(t, check(vectorTime.Add(5*time.Minute), 0), "exactly the default tolerance late")
	require.NoError(t, check(vectorTime.Add(-5*time.Minute), 0), "exactly the default tolerance early")
	require.ErrorIs(t, check(vectorTime.Add(5*time.Minute+time.Second), 0), webhook.ErrTimestampTooOld)
	require.ErrorIs(t, check(vectorTime.Add(-5*time.Minute-time.Second), 0), webhook.ErrTimestampTooNew)
	require.ErrorIs(t, check(vectorTime.Add(31*time.Second), 30*time.Second), webhook.ErrTimestampTooOld)
	require.NoError(t, check(vectorTime.Add(time.Hour), 2*time.Hour))
}

func TestVerify_MalformedInput(t *testing.T) {
	body := []byte(vectorPayload)
	for _, name := range []string{webhook.HeaderID, webhook.HeaderTimestamp, webhook.HeaderSignature} {
		h := vectorHeaders(vectorSignature)
		h.Del(name)
		require.ErrorIs(t, webhook.Verify(vectorSecret, h, body, 0, vectorTime), webhook.ErrMissingHeaders, name)
	}
	for _, ts := range []string{"1614265330.5", "abc", "-", "99999999999999999999"} {
		h := vectorHeaders(vectorSignature)
		h.Set(webhook.HeaderTimestamp, ts)
		require.ErrorIs(t, webhook.Verify(vectorSecret, h, body, 0, vectorTime), webhook.ErrInvalidTimestamp, ts)
	}
	for _, secret := range []string{"", "whsec_", "whsec_not base64!"} {
		require.ErrorIs(t, webhook.Verify(secret, vectorHeaders(vectorSignature), body, 0, vectorTime), webhook.ErrInvalidSecret)
		_, err := webhook.Sign(secret, vectorID, vectorTime, body)
		require.ErrorIs(t, err, webhook.ErrInvalidSecret)
	}
}

func TestVerifier_DoesNotPrintTheKey(t *testing.T) {
	v, err := webhook.NewVerifier(vectorSecret)
	require.NoError(t, err)
	v.Now = func() time.Time { return vectorTime }
	require.NoError(t, v.Verify(vectorHeaders(vectorSignature), []byte(vectorPayload)))
	for _, s := range []string{v.String(), strings.ReplaceAll(strings.ReplaceAll(fmtAll(v), " ", ""), "\n", "")} {
		require.NotContains(t, s, "MfKQ9r8G")
	}
}

func FuzzVerify(f *testing.F) {
	f.Add(vectorSignature, []byte(vectorPayload), int64(vectorTimestamp))
	f.Add("v1,abc v1,"+strings.Repeat("=", 50), []byte{}, int64(-1))
	f.Fuzz(func(t *testing.T, sig string, body []byte, ts int64) {
		h := vectorHeaders(sig)
		h.Set(webhook.HeaderTimestamp, strconv.FormatInt(ts, 10))
		err := webhook.Verify(vectorSecret, h, body, time.Hour, vectorTime)
		good, serr := webhook.Sign(vectorSecret, vectorID, time.Unix(ts, 0), body)
		require.NoError(t, serr)
		if err == nil {
			require.Contains(t, strings.Fields(sig), good, "only a correct signature verifies")
		}
		h.Set(webhook.HeaderSignature, sig+" "+good)
		err = webhook.Verify(vectorSecret, h, body, time.Hour, vectorTime)
		if d := vectorTime.Sub(time.Unix(ts, 0)); d >= -time.Hour && d <= time.Hour {
			require.NoError(t, err, "a correct signature among others verifies")
		}
	})
}
