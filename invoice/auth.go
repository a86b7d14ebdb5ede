package invoice

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/httpapi"
)

// ErrUnauthorized is returned for a missing, malformed, wrong, rotated or
// disabled credential. It never says which.
var ErrUnauthorized = errors.New("invoice: unauthorized")

// MerchantReader is what the Authenticator reads: one indexed lookup by
// api_key digest (the merchant's own key), then, for a scoped key, its row
// and its merchant's.
type MerchantReader interface {
	GetMerchantByAPIKeyDigest(ctx context.Context, digest []byte) (store.Merchant, error)
	GetAPIKeyByDigest(ctx context.Context, digest []byte) (store.APIKey, error)
	GetMerchant(ctx context.Context, id int64) (store.Merchant, error)
}

// AuthConfig tunes an Authenticator.
type AuthConfig struct {
	// VerifiedCacheSize bounds how many api_keys the process remembers as
	// verified by Argon2id. Defaults to 10,000.
	VerifiedCacheSize int
	// MaxConcurrentHashes bounds the Argon2id verifications running at once
	// (each holds 19 MiB for ~50 ms). Defaults to 2.
	MaxConcurrentHashes int
}

func (c *AuthConfig) fill() {
	c.VerifiedCacheSize = cmp.Or(c.VerifiedCacheSize, 10_000)
	c.MaxConcurrentHashes = cmp.Or(c.MaxConcurrentHashes, 2)
}

func (c AuthConfig) validate() error {
	if c.VerifiedCacheSize < 1 || c.MaxConcurrentHashes < 1 {
		return errors.New("invoice: AuthConfig sizes must be positive")
	}
	return nil
}

// Authenticator checks `Authorization: Bearer <api_key>` headers.
//
// Each request costs one HMAC-SHA256 of the key and an indexed lookup of
// the merchant by that digest, which concurrent requests with the same key
// share when it starts after all of them arrived (merchantLookups). The Argon2id hash stored beside the digest is
// verified once per key per process (concurrent first requests share one
// verification) and the result is cached by digest together with the hash
// it matched. Because the merchant row is read on every request, a rotated
// key (its digest is gone) or a disabled merchant fails on the very next
// request, in every replica: there is no cache of merchants to expire.
type Authenticator struct {
	st    MerchantReader
	creds *Credentials
	cfg   AuthConfig
	sem   chan struct{}

	lookups *merchantLookups

	mu       sync.Mutex
	verified map[[32]byte]string  // digest → Argon2id hash it matched
	flights  map[[32]byte]*flight // verifications in progress

	hashes atomic.Int64 // Argon2id verifications run (tests read it)
}

type flight struct {
	done chan struct{}
	hash string
	ok   bool
	err  error
}

// NewAuthenticator returns an Authenticator reading merchants from st.
func NewAuthenticator(st MerchantReader, creds *Credentials, cfg AuthConfig) (*Authenticator, error) {
	cfg.fill()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if st == nil || creds == nil {
		return nil, errors.New("invoice: NewAuthenticator needs a store and credentials")
	}
	return &Authenticator{
		st: st, creds: creds, cfg: cfg, lookups: newMerchantLookups(st),
		sem:      make(chan struct{}, cfg.MaxConcurrentHashes),
		verified: make(map[[32]byte]string),
		flights:  make(map[[32]byte]*flight),
	}, nil
}

// Authenticate returns the merchant whose api_key is the request's bearer
// token. ErrUnauthorized for a missing, wrong, rotated or disabled key;
// other errors (the database is down) are not about the caller.
func (a *Authenticator) Authenticate(r *http.Request) (store.Merchant, error) {
	key, ok := httpapi.BearerToken(r)
	if !ok {
		return store.Merchant{}, ErrUnauthorized
	}
	return a.AuthenticateKey(r.Context(), key)
}

// AuthenticateKey is Authenticate for a bare api_key.
func (a *Authenticator) AuthenticateKey(ctx context.Context, key string) (store.Merchant, error) {
	p, err := a.AuthenticatePrincipal(ctx, key)
	return p.Merchant, err
}

// Principal is who makes an API request: a merchant, with its own key
// (KeyID 0: every scope) or one of its scoped keys (docs/refunds.md).
type Principal struct {
	Merchant store.Merchant
	// KeyID is the scoped key's id; 0 for the merchant's own key.
	KeyID int64
	// Scopes are a scoped key's scopes (the merchant's own key has all).
	Scopes store.Scopes
	// UserID is the dashboard user acting (0: none), with the Scopes of
	// the user's role: a refund's approver must be another person.
	UserID int64
}

// Has reports whether the principal may use scope.
func (p Principal) Has(scope string) bool {
	return (p.KeyID == 0 && p.UserID == 0) || p.Scopes.Has(scope)
}

// AuthenticatePrincipal returns who holds api key key: the merchant whose
// own key it is, or the merchant and scopes of a scoped key. A revoked
// key, like a wrong one, is ErrUnauthorized.
func (a *Authenticator) AuthenticatePrincipal(ctx context.Context, key string) (Principal, error) {
	if !wellFormedAPIKey(key) {
		return Principal{}, ErrUnauthorized
	}
	digest := a.creds.APIKeyDigest(key)
	m, err := a.lookups.get(ctx, [32]byte(digest))
	if errors.Is(err, store.ErrNotFound) {
		return a.scopedKey(ctx, digest, key)
	}
	if err != nil {
		return Principal{}, fmt.Errorf("invoice: authenticate: %w", err)
	}
	if m.DisabledAt != nil {
		return Principal{}, ErrUnauthorized
	}
	ok, err := a.verify(ctx, [32]byte(digest), key, m.APIKeyHash)
	if err != nil {
		return Principal{}, err
	}
	if !ok {
		return Principal{}, ErrUnauthorized
	}
	return Principal{Merchant: m}, nil
}

// scopedKey authenticates one of a merchant's scoped keys: its row by
// digest, not revoked, its Argon2id hash (verified once per process, like
// a merchant's key), and its merchant, not disabled.
func (a *Authenticator) scopedKey(ctx context.Context, digest []byte, key string) (Principal, error) {
	k, err := a.st.GetAPIKeyByDigest(ctx, digest)
	if errors.Is(err, store.ErrNotFound) {
		return Principal{}, ErrUnauthorized
	}
	if err != nil {
		return Principal{}, fmt.Errorf("invoice: authenticate: %w", err)
	}
	if k.RevokedAt != nil {
		return Principal{}, ErrUnauthorized
	}
	m, err := a.st.GetMerchant(ctx, k.MerchantID)
	if err != nil {
		return Principal{}, fmt.Errorf("invoice: authenticate: %w", err)
	}
	if m.DisabledAt != nil {
		return Principal{}, ErrUnauthorized
	}
	ok, err := a.verify(ctx, [32]byte(digest), key, k.Hash)
	if err != nil {
		return Principal{}, err
	}
	if !ok {
		return Principal{}, ErrUnauthorized
	}
	return Principal{Merchant: m, KeyID: k.ID, Scopes: k.Scopes}, nil
}

// verify checks key against hash, running Argon2id only when this digest
// has not been verified against this hash before.
func (a *Authenticator) verify(ctx context.Context, digest [32]byte, key, hash string) (bool, error) {
	a.mu.Lock()
	if a.verified[digest] == hash {
		a.mu.Unlock()
		return true, nil
	}
	f, running := a.flights[digest]
	if !running || f.hash != hash {
		f = &flight{done: make(chan struct{}), hash: hash}
		a.flights[digest] = f
		go a.run(digest, key, f)
	}
	a.mu.Unlock()
	select {
	case <-f.done:
		return f.ok, f.err
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// run verifies in its own goroutine, so that a caller that gives up does
// not waste the work others wait for.
func (a *Authenticator) run(digest [32]byte, key string, f *flight) {
	a.sem <- struct{}{}
	a.hashes.Add(1)
	f.ok, f.err = verifyAPIKey(key, f.hash)
	<-a.sem
	a.mu.Lock()
	if a.flights[digest] == f {
		delete(a.flights, digest)
	}
	if f.ok {
		if len(a.verified) >= a.cfg.VerifiedCacheSize {
			for k := range a.verified { // evict an arbitrary entry
				delete(a.verified, k)
				break
			}
		}
		a.verified[digest] = f.hash
	}
	a.mu.Unlock()
	close(f.done)
}

// forget drops a digest from the verified cache (its key was rotated).
func (a *Authenticator) forget(digest []byte) {
	if len(digest) != 32 {
		return
	}
	a.mu.Lock()
	delete(a.verified, [32]byte(digest))
	a.mu.Unlock()
}
