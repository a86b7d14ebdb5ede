package dashboard

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"crypto/subtle"
	"encoding/base32"
	"encoding/binary"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// TOTP (RFC 6238): HMAC-SHA1, 6 digits, 30-second steps, one step of
// clock drift either way; a step is accepted once (store.UseTOTPStep).

const (
	totpPeriod = 30
	totpDigits = 6
)

// totpCode is the RFC 4226 HOTP value of key at counter, digits long.
func totpCode(key []byte, counter uint64, digits int) string {
	var msg [8]byte
	binary.BigEndian.PutUint64(msg[:], counter)
	m := hmac.New(sha1.New, key)
	m.Write(msg[:])
	sum := m.Sum(nil)
	off := sum[len(sum)-1] & 0x0f
	v := binary.BigEndian.Uint32(sum[off:off+4]) & 0x7fffffff
	mod := uint32(1)
	for range digits {
		mod *= 10
	}
	return fmt.Sprintf("%0*d", digits, v%mod)
}

// totpStep is the time step of t.
func totpStep(t time.Time) int64 { return t.Unix() / totpPeriod }

// totpMatch returns the step within one of now's that code is for, or 0.
func totpMatch(key []byte, code string, now time.Time) int64 {
	code = strings.ReplaceAll(strings.TrimSpace(code), " ", "")
	if len(code) != totpDigits {
		return 0
	}
	step := totpStep(now)
	for _, s := range []int64{step, step - 1, step + 1} {
		if subtle.ConstantTimeCompare([]byte(totpCode(key, uint64(s), totpDigits)), []byte(code)) == 1 {
			return s
		}
	}
	return 0
}

// newTOTPKey is 20 random bytes (RFC 4226's recommended 160 bits).
func newTOTPKey() ([]byte, error) {
	k := make([]byte, 20)
	_, err := rand.Read(k)
	return k, err
}

var b32 = base32.StdEncoding.WithPadding(base32.NoPadding)

// totpURI is the otpauth:// URI authenticator apps read (Key URI Format).
func totpURI(key []byte, issuer, account string) string {
	v := url.Values{}
	v.Set("secret", b32.EncodeToString(key))
	v.Set("issuer", issuer)
	v.Set("algorithm", "SHA1")
	v.Set("digits", "6")
	v.Set("period", "30")
	return "otpauth://totp/" + url.PathEscape(issuer+":"+account) + "?" + v.Encode()
}
