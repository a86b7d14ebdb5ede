package webhook

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/evmpay/evmpay/store"
)

// maxRecordBatch caps the attempts one write records.
const maxRecordBatch = 256

// recorder writes the results of attempts in batches: attempts finishing
// while a write is in flight wait for the next one, which records them all
// with one statement (group commit). With many attempts in flight this
// turns one database round trip and commit per delivery into one per
// batch; a lone attempt is written at once, as before.
//
// Each caller still sees its own outcome: nil, store.ErrConflict when its
// lease is no longer held, or the write's error (then nothing of that
// batch was recorded and each caller retries on its own, as with a single
// write).
type recorder struct {
	st Store

	mu      sync.Mutex
	queue   []recordReq
	writing bool // a goroutine is draining queue
}

type recordReq struct {
	a    store.DeliveryAttempt
	done chan error
}

// record queues one attempt and waits for its write, or for ctx.
func (r *recorder) record(ctx context.Context, d store.Delivery, held time.Time) error {
	req := recordReq{a: store.DeliveryAttempt{Delivery: d, Held: held}, done: make(chan error, 1)}
	r.mu.Lock()
	r.queue = append(r.queue, req)
	if !r.writing {
		r.writing = true
		go r.drain()
	}
	r.mu.Unlock()
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
		// The write may still happen; the caller treats this like any
		// failed write (it retries, and a retry of an attempt already
		// recorded finds its lease gone).
		return ctx.Err()
	}
}

// drain writes queued attempts until the queue is empty.
func (r *recorder) drain() {
	for {
		r.mu.Lock()
		n := min(len(r.queue), maxRecordBatch)
		if n == 0 {
			r.writing = false
			r.mu.Unlock()
			return
		}
		batch := r.queue[:n:n]
		r.queue = r.queue[n:]
		if len(r.queue) == 0 {
			r.queue = nil
		}
		r.mu.Unlock()
		r.write(batch)
	}
}

func (r *recorder) write(batch []recordReq) {
	as := make([]store.DeliveryAttempt, len(batch))
	for i, req := range batch {
		as[i] = req.a
	}
	ctx, cancel := context.WithTimeout(context.Background(), dbTimeout)
	ok, err := r.st.RecordDeliveryAttempts(ctx, as)
	cancel()
	for i, req := range batch {
		switch {
		case err != nil:
			req.done <- err
		case !ok[i]:
			req.done <- leaseLost(req.a.Delivery.ID)
		default:
			req.done <- nil
		}
	}
}

func leaseLost(id int64) error {
	return fmt.Errorf("%w: delivery %d is no longer leased by this dispatcher", store.ErrConflict, id)
}
