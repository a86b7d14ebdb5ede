package dashboard

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// RFC 6238 appendix B's test vectors for HMAC-SHA1 (8 digits, the key
// "12345678901234567890").
func TestTOTP_RFC6238Vectors(t *testing.T) {
	key := []byte("12345678901234567890")
	for _, v := range []struct {
		unix int64
		code string
	}{
		{59, "94287082"},
		{1111111109, "07081804"},
		{1111111111, "14050471"},
		{1234567890, "89005924"},
		{2000000000, "69279037"},
		{20000000000, "65353130"},
	} {
		require.Equal(t, v.code, totpCode(key, uint64(totpStep(time.Unix(v.unix, 0))), 8), "T = %d", v.unix)
	}
}

func TestTOTP_MatchesTheStepAndItsNeighboursOnly(t *testing.T) {
	key := []byte("12345678901234567890")
	now := time.Unix(1234567890, 0)
	step := totpStep(now)
	for _, s := range []int64{step - 1, step, step + 1} {
		require.Equal(t, s, totpMatch(key, totpCode(key, uint64(s), 6), now))
	}
	require.Zero(t, totpMatch(key, totpCode(key, uint64(step-2), 6), now), "two steps old")
	require.Zero(t, totpMatch(key, "12345", now), "too short")
	require.Zero(t, totpMatch(key, totpCode(key, uint64(step), 6), now.Add(90*time.Second)))
	require.Contains(t, totpURI(key, "evmpay", "ana@example.com"), "secret=GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ")
}
