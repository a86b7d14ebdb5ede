package invoice

import (
	"context"
	"fmt"
	"time"

	"github.com/evmpay/evmpay/store"
)

// Group commit of Idempotency-Keys.
//
// A creation first commits its key's IN_FLIGHT record (createInvoice). Alone,
// that is a transaction per request: a statement, a commit and a round trip
// each, which cost the database about as much as the invoice itself. So the
// records of concurrent requests are inserted together, like their invoices
// (batch.go): a request queues its record, and one committer goroutine
// inserts whatever is queued in one statement (INSERT … ON CONFLICT DO
// NOTHING), then answers each request: its record was inserted, or its key
// is taken (ErrConflict, as CreateIdempotencyRecord says). What a request
// does next is unchanged: a taken key is read, replayed, refused or claimed
// on the request's own path. Two requests of one group with the same key:
// the first one's record goes in, the second is told the key is taken.
//
// Nothing waits to fill a group: alone, a request is a group of one, one
// goroutine hand-off away from the plain insert. A request whose context
// ends while queued withdraws; once its group is running it waits for the
// outcome, so that a record inserted for it is released by its caller like
// any other.

// keyJob is an IN_FLIGHT record waiting for the key committer.
type keyJob struct {
	rec  store.IdempotencyRecord
	done chan error // buffered: the committer never blocks on it
}

// keyClaimer inserts queued IN_FLIGHT records in groups.
type keyClaimer struct {
	st      store.IdempotencyStore
	timeout time.Duration // of one group's statement
	q       groupQueue[*keyJob]
}

func newKeyClaimer(st store.IdempotencyStore, max int, timeout time.Duration) *keyClaimer {
	c := &keyClaimer{st: st, timeout: timeout}
	c.q = groupQueue[*keyJob]{max: max, commit: c.commit}
	return c
}

// create inserts rec (an IN_FLIGHT record) with the records of concurrent
// requests: nil when it was inserted, an error wrapping store.ErrConflict
// when its merchant has used the key, another error when the database
// failed.
func (c *keyClaimer) create(ctx context.Context, rec store.IdempotencyRecord) error {
	j := &keyJob{rec: rec, done: make(chan error, 1)}
	c.q.submit(j)
	select {
	case err := <-j.done:
		return err
	case <-ctx.Done():
		if c.q.withdraw(j) {
			return context.Cause(ctx)
		}
		return <-j.done
	}
}

// commit inserts one group's records and answers each job.
func (c *keyClaimer) commit(group []*keyJob) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	type pk struct {
		merchantID int64
		key        string
	}
	first := make(map[pk]bool, len(group))
	var (
		recs []store.IdempotencyRecord
		jobs []*keyJob
		dups []*keyJob
	)
	for _, j := range group {
		id := pk{j.rec.MerchantID, j.rec.Key}
		if first[id] {
			dups = append(dups, j)
			continue
		}
		first[id] = true
		recs = append(recs, j.rec)
		jobs = append(jobs, j)
	}
	created, err := c.st.CreateIdempotencyRecords(ctx, recs)
	for i, j := range jobs {
		switch {
		case err != nil:
			j.done <- err
		case created[i]:
			j.done <- nil
		default:
			j.done <- errKeyTaken
		}
	}
	for _, j := range dups {
		if err != nil {
			j.done <- err
		} else {
			j.done <- errKeyTaken
		}
	}
}

// errKeyTaken is the answer for a record whose key its merchant has used.
var errKeyTaken = fmt.Errorf("%w: idempotency key already used", store.ErrConflict)
