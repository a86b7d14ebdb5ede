package invoice

import (
	"bytes"
	"context"
	"sync"
	"time"

	"github.com/evmpay/evmpay/store"
)

// merchantLookups reads merchants by api_key digest, one read for many
// concurrent requests with the same key.
//
// Every request must see the merchant row as it is when the request
// arrives: a rotated key or a disabled merchant fails on the very next
// request. So a request never takes the result of a read that was already
// running when it arrived. A request that finds no read of its digest
// running reads at once, itself. One that arrives while a read runs joins
// the digest's next read, which starts when the running one ends and
// serves every request that joined it: under load, a merchant's requests
// share one read per database round trip instead of making one each, and
// each read still starts after every request it answers arrived.
type merchantLookups struct {
	st MerchantReader

	mu      sync.Mutex
	digests map[[32]byte]*digestLookups
}

// digestLookups is the state of one digest's reads: one running, and the
// next one, which requests join until it starts.
type digestLookups struct {
	next *merchantLookup // nil when no request waits for a read
}

// merchantLookup is one read and its outcome, set before done closes.
type merchantLookup struct {
	done chan struct{}
	m    store.Merchant
	err  error
}

// lookupTimeout bounds a shared read, which runs under no request's
// context.
const lookupTimeout = 30 * time.Second

func newMerchantLookups(st MerchantReader) *merchantLookups {
	return &merchantLookups{st: st, digests: make(map[[32]byte]*digestLookups)}
}

// get returns the merchant whose api_key digest is digest (store.ErrNotFound
// when there is none), read after this call began.
func (l *merchantLookups) get(ctx context.Context, digest [32]byte) (store.Merchant, error) {
	l.mu.Lock()
	d, running := l.digests[digest]
	if !running {
		// No read of this digest runs: read now, on the caller's context.
		l.digests[digest] = &digestLookups{}
		l.mu.Unlock()
		m, err := l.st.GetMerchantByAPIKeyDigest(ctx, digest[:])
		l.finished(digest)
		return m, err
	}
	if d.next == nil {
		d.next = &merchantLookup{done: make(chan struct{})}
	}
	next := d.next
	l.mu.Unlock()
	select {
	case <-next.done:
		return cloneMerchant(next.m), next.err
	case <-ctx.Done():
		return store.Merchant{}, context.Cause(ctx)
	}
}

// finished is called when a read of digest ends: the next read, if any
// request joined it, starts now.
func (l *merchantLookups) finished(digest [32]byte) {
	l.mu.Lock()
	d := l.digests[digest]
	next := d.next
	d.next = nil
	if next == nil {
		delete(l.digests, digest)
	}
	l.mu.Unlock()
	if next != nil {
		go l.run(digest, next)
	}
}

// run makes a read that requests joined and hands them its outcome.
func (l *merchantLookups) run(digest [32]byte, r *merchantLookup) {
	ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
	r.m, r.err = l.st.GetMerchantByAPIKeyDigest(ctx, digest[:])
	cancel()
	close(r.done)
	l.finished(digest)
}

// cloneMerchant copies what m refers to, so that requests sharing a read
// share no memory.
func cloneMerchant(m store.Merchant) store.Merchant {
	m.APIKeyDigest = bytes.Clone(m.APIKeyDigest)
	m.WebhookSecretCiphertext = bytes.Clone(m.WebhookSecretCiphertext)
	if m.DisabledAt != nil {
		t := *m.DisabledAt
		m.DisabledAt = &t
	}
	return m
}
