package webhook

import (
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":                     0,
		"0":                    0,
		"-5":                   0,
		"120":                  2 * time.Minute,
		" 7 ":                  7 * time.Second,
		"1.5":                  0,
		"later":                0,
		"99999999999999999999": 0,
		"9999999999":           365 * 24 * time.Hour,
		now.Add(90 * time.Second).Format(http.TimeFormat):  90 * time.Second,
		now.Add(-90 * time.Second).Format(http.TimeFormat): 0,
		now.Add(time.Hour).Format(time.RFC850):             time.Hour,
	} {
		require.Equal(t, want, parseRetryAfter(v, now), "%q", v)
	}
}

func TestPublicAddr(t *testing.T) {
	for a, want := range map[string]bool{
		"93.184.215.14":        true,
		"2606:4700::6810:85e5": true,
		"127.0.0.1":            false,
		"10.1.2.3":             false,
		"172.16.0.1":           false,
		"192.168.1.1":          false,
		"169.254.169.254":      false,
		"100.64.0.1":           false,
		"0.0.0.0":              false,
		"255.255.255.255":      false,
		"224.0.0.1":            false,
		"::1":                  false,
		"::":                   false,
		"fd00::1":              false,
		"fe80::1":              false,
		"::ffff:127.0.0.1":     false,
		"::ffff:10.0.0.1":      false,
		"64:ff9b::a00:1":       false,
		"2002:a00:1::":         false,
	} {
		require.Equal(t, want, publicAddr(netip.MustParseAddr(a)), a)
	}
	require.ErrorIs(t, refusePrivate("tcp", "127.0.0.1:80", nil), errBlockedDestination)
	require.ErrorIs(t, refusePrivate("tcp", "not an address", nil), errBlockedDestination)
	require.NoError(t, refusePrivate("tcp", "93.184.215.14:443", nil))
}

func TestDelay_LadderRetryAfterAndCap(t *testing.T) {
	d := &Dispatcher{cfg: Config{Jitter: -1, MaxRetryAfter: time.Hour}.withDefaults()}
	require.Equal(t, 5*time.Second, d.delay(1, 0))
	require.Equal(t, 10*time.Hour, d.delay(7, 0))
	require.Equal(t, 10*time.Hour, d.delay(12, 0), "past the ladder: its last rung")
	require.Equal(t, time.Minute, d.delay(1, time.Minute), "Retry-After longer than the rung wins")
	require.Equal(t, 5*time.Minute, d.delay(2, time.Minute), "the rung wins when longer")
	require.Equal(t, time.Hour, d.delay(1, 48*time.Hour), "Retry-After is capped")
}
