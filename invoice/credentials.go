package invoice

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/crypto/argon2"

	"github.com/evmpay/evmpay/store"
)

// MinSecretKeyLen is the shortest PAY_SECRET_KEY NewCredentials accepts.
const MinSecretKeyLen = 32

// HKDF-SHA256 info labels of the subkeys derived from PAY_SECRET_KEY. They
// are part of the stored data's format: changing one makes every stored
// digest and ciphertext unreadable.
const (
	labelAPIKeyLookup       = "evmpay/v1/api-key-lookup-hmac"
	labelWebhookSecret      = "evmpay/v1/webhook-secret-aes-256-gcm"
	labelIdempotentResponse = "evmpay/v1/idempotent-response-aes-256-gcm"
)

// Credential formats.
const (
	// APIKeyPrefix starts every api_key, so that secret scanners and people
	// recognise one. 32 random bytes (base64url, 43 characters) follow.
	APIKeyPrefix = "evmpay_sk_"
	// WebhookSecretPrefix starts every webhook secret (Standard Webhooks);
	// the standard base64 of 32 random bytes follows.
	WebhookSecretPrefix = "whsec_"

	apiKeyRandomBytes  = 32
	apiKeyLen          = len(APIKeyPrefix) + 43
	apiKeyShownChars   = len(APIKeyPrefix) + 6
	lookupTokenBytes   = 16 // 128 bits
	lookupTokenLen     = 22 // base64url without padding
	sealedFormatV1     = 1
	webhookSecretBytes = 32
)

// Argon2id parameters for api_key hashes: OWASP's minimum recommendation
// (m = 19 MiB, t = 2, p = 1).
const (
	argonTime    = 2
	argonMemory  = 19 * 1024 // KiB
	argonThreads = 1
	argonKeyLen  = 32
	argonSaltLen = 16
)

// ErrSecretKey is returned by NewCredentials for a missing or short key.
var ErrSecretKey = fmt.Errorf("invoice: PAY_SECRET_KEY must be at least %d bytes", MinSecretKeyLen)

// errSealed reports a ciphertext that does not open: wrong key, wrong
// associated data or corrupted bytes. It never says which.
var errSealed = errors.New("invoice: sealed value does not open (wrong PAY_SECRET_KEY or corrupted data)")

// Credentials holds the subkeys derived from PAY_SECRET_KEY. It turns
// api_keys into lookup digests, seals and opens webhook secrets, and seals
// stored idempotent responses. It is safe for concurrent use and never
// prints its keys.
type Credentials struct {
	lookupKey []byte
	webhook   cipher.AEAD
	response  cipher.AEAD
}

// NewCredentials derives, with HKDF-SHA256 from secretKey (PAY_SECRET_KEY,
// at least MinSecretKeyLen bytes), three independent subkeys: the HMAC-SHA256
// key of api_key lookup digests, the AES-256-GCM key of webhook secrets, and
// the AES-256-GCM key of stored idempotent responses (which hold the
// once-shown lookup_token).
func NewCredentials(secretKey []byte) (*Credentials, error) {
	if len(secretKey) < MinSecretKeyLen {
		return nil, ErrSecretKey
	}
	lookup, err := hkdf.Key(sha256.New, secretKey, nil, labelAPIKeyLookup, 32)
	if err != nil {
		return nil, fmt.Errorf("invoice: derive keys: %w", err)
	}
	webhook, err := newAEAD(secretKey, labelWebhookSecret)
	if err != nil {
		return nil, err
	}
	response, err := newAEAD(secretKey, labelIdempotentResponse)
	if err != nil {
		return nil, err
	}
	return &Credentials{lookupKey: lookup, webhook: webhook, response: response}, nil
}

func newAEAD(secret []byte, label string) (cipher.AEAD, error) {
	key, err := hkdf.Key(sha256.New, secret, nil, label, 32)
	if err != nil {
		return nil, fmt.Errorf("invoice: derive keys: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("invoice: derive keys: %w", err)
	}
	return cipher.NewGCM(block)
}

// String keeps the keys out of logs and fmt output.
func (c *Credentials) String() string { return "invoice.Credentials{[REDACTED]}" }

// GoString keeps the keys out of %#v output.
func (c *Credentials) GoString() string { return c.String() }

// WebhookSecret decrypts m's webhook secret ("whsec_…"), the key that signs
// its webhooks.
func (c *Credentials) WebhookSecret(m store.Merchant) (string, error) {
	plain, err := open(c.webhook, m.WebhookSecretCiphertext, webhookAAD(m.ID))
	if err != nil {
		return "", fmt.Errorf("invoice: webhook secret of merchant %d: %w", m.ID, err)
	}
	return string(plain), nil
}

// APIKeyDigest returns HMAC-SHA256(lookup key, apiKey), the indexed lookup
// key stored as store.Merchant.APIKeyDigest.
func (c *Credentials) APIKeyDigest(apiKey string) []byte {
	mac := hmac.New(sha256.New, c.lookupKey)
	mac.Write([]byte(apiKey))
	return mac.Sum(nil)
}

func webhookAAD(merchantID int64) []byte {
	return []byte("evmpay/webhook-secret/merchant/" + strconv.FormatInt(merchantID, 10))
}

func responseAAD(merchantID int64, key string) []byte {
	return []byte("evmpay/idempotent-response/merchant/" + strconv.FormatInt(merchantID, 10) + "/key/" + key)
}

func (c *Credentials) sealWebhookSecret(merchantID int64, secret string) ([]byte, error) {
	return seal(c.webhook, []byte(secret), webhookAAD(merchantID))
}

func (c *Credentials) sealResponse(merchantID int64, key string, body []byte) ([]byte, error) {
	return seal(c.response, body, responseAAD(merchantID, key))
}

func (c *Credentials) openResponse(merchantID int64, key string, sealed []byte) ([]byte, error) {
	return open(c.response, sealed, responseAAD(merchantID, key))
}

// seal returns version ‖ nonce ‖ AES-256-GCM(plain) with a random nonce.
func seal(aead cipher.AEAD, plain, aad []byte) ([]byte, error) {
	out := make([]byte, 1+aead.NonceSize(), 1+aead.NonceSize()+len(plain)+aead.Overhead())
	out[0] = sealedFormatV1
	if _, err := rand.Read(out[1:]); err != nil {
		return nil, fmt.Errorf("invoice: random nonce: %w", err)
	}
	return aead.Seal(out, out[1:], plain, aad), nil
}

func open(aead cipher.AEAD, sealed, aad []byte) ([]byte, error) {
	n := aead.NonceSize()
	if len(sealed) < 1+n+aead.Overhead() || sealed[0] != sealedFormatV1 {
		return nil, errSealed
	}
	plain, err := aead.Open(nil, sealed[1:1+n], sealed[1+n:], aad)
	if err != nil {
		return nil, errSealed
	}
	return plain, nil
}

// newAPIKey returns a fresh api_key and the values stored for it: lookup
// digest, Argon2id hash (PHC string) and displayable prefix.
func (c *Credentials) newAPIKey() (key string, digest []byte, hash, prefix string, err error) {
	b := make([]byte, apiKeyRandomBytes)
	if _, err := rand.Read(b); err != nil {
		return "", nil, "", "", fmt.Errorf("invoice: random api key: %w", err)
	}
	key = APIKeyPrefix + base64.RawURLEncoding.EncodeToString(b)
	hash, err = hashAPIKey(key)
	if err != nil {
		return "", nil, "", "", err
	}
	return key, c.APIKeyDigest(key), hash, key[:apiKeyShownChars], nil
}

// wellFormedAPIKey reports whether s has the shape of an api_key, so that
// garbage is refused without touching the database.
func wellFormedAPIKey(s string) bool {
	if len(s) != apiKeyLen || !strings.HasPrefix(s, APIKeyPrefix) {
		return false
	}
	return isBase64URL(s[len(APIKeyPrefix):])
}

func isBase64URL(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// hashAPIKey returns the Argon2id hash of key in PHC string format.
func hashAPIKey(key string) (string, error) {
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("invoice: random salt: %w", err)
	}
	sum := argon2.IDKey([]byte(key), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime,
		argonThreads, base64.RawStdEncoding.EncodeToString(salt), base64.RawStdEncoding.EncodeToString(sum)), nil
}

// verifyAPIKey reports whether key matches the PHC-format Argon2id hash.
// Parameters come from the hash (bounded, so that a corrupt row cannot make
// the process allocate without limit).
func verifyAPIKey(key, phc string) (bool, error) {
	parts := strings.Split(phc, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" || parts[2] != "v="+strconv.Itoa(argon2.Version) {
		return false, errors.New("invoice: api key hash is not an argon2id PHC string")
	}
	var m, t uint32
	var p uint8
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &m, &t, &p); err != nil {
		return false, fmt.Errorf("invoice: api key hash parameters: %w", err)
	}
	if m == 0 || m > 1<<20 || t == 0 || t > 16 || p == 0 {
		return false, errors.New("invoice: api key hash parameters out of range")
	}
	salt, err := base64.RawStdEncoding.DecodeString(parts[4])
	if err != nil {
		return false, fmt.Errorf("invoice: api key hash salt: %w", err)
	}
	want, err := base64.RawStdEncoding.DecodeString(parts[5])
	if err != nil || len(want) == 0 || len(want) > 1024 {
		return false, errors.New("invoice: api key hash digest is malformed")
	}
	got := argon2.IDKey([]byte(key), salt, t, m, p, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// newWebhookSecret returns "whsec_" + base64 of 32 random bytes.
func newWebhookSecret() (string, error) {
	b := make([]byte, webhookSecretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("invoice: random webhook secret: %w", err)
	}
	return WebhookSecretPrefix + base64.StdEncoding.EncodeToString(b), nil
}

// newLookupToken returns a public lookup token (128 random bits,
// base64url) and the SHA-256 hash stored for it.
func newLookupToken() (token string, hash []byte, err error) {
	b := make([]byte, lookupTokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", nil, fmt.Errorf("invoice: random lookup token: %w", err)
	}
	token = base64.RawURLEncoding.EncodeToString(b)
	return token, LookupTokenHash(token), nil
}

// LookupTokenHash returns SHA-256 of a lookup token, the value stored as
// store.Invoice.LookupTokenHash.
func LookupTokenHash(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

func wellFormedLookupToken(s string) bool {
	return len(s) == lookupTokenLen && isBase64URL(s)
}
