package invoice

import (
	"context"
	"log/slog"
	"time"

	"github.com/evmpay/evmpay/store"
)

// Group commit.
//
// Every invoice takes the next derivation index from one counter row, whose
// lock is held from the counter update to the commit: creations are
// serialised on that transaction, however many requests run at once. So
// the requests of one process do not each run it: a request that holds its
// Idempotency-Key queues a createJob, and one committer goroutine takes
// whatever is queued (at most Config.CreateBatchSize, with no wait beyond
// the transaction in progress) and writes it in one transaction: one
// counter update reserving n indexes, one multi-row insert, one update
// completing the n records under their own leases, one commit. Then it
// answers each request. Under load the batches grow with the queue; alone,
// a request is a batch of one and takes the per-request path
// (insertInvoice) at no added latency beyond a goroutine hand-off.
//
// A batch that fails (a member's lease was taken over, a unique violation,
// an exhausted wallet) is rolled back whole, so it uses no index; its
// members are then retried one by one on the per-request path, so that one
// bad request fails alone and the others are created.
//
// The committer runs only while creations are queued: there is nothing to
// start or stop. A request waits for its answer, so http.Server.Shutdown,
// which waits for the handlers, drains the queue. A request whose context
// ends while it is queued withdraws (nothing was written; its key is freed
// at once); once its batch has started, the batch's outcome stands and the
// request waits for it (an invoice committed under its key is replayed to
// the client's retry). A batch runs under its own deadline,
// Config.IdempotencyLease, not under any member's request context.
//
// Replicas each batch their own requests; the counter row still
// serialises the batches of all replicas.

// createJob is a creation whose Idempotency-Key is held (IN_FLIGHT under
// rec's lease) and whose invoice is yet to be written.
type createJob struct {
	m         store.Merchant
	key       string
	rec       store.IdempotencyRecord
	req       invoiceRequest
	now       time.Time
	token     string // the lookup token, shown once
	tokenHash []byte
	// pricing is a fiat invoice's price, tolerance and locked quotes.
	pricing *store.Pricing

	done chan createResult // buffered: the committer never blocks on it
}

type createResult struct {
	resp response
	err  error
}

// batcher queues createJobs for the committer goroutine.
type batcher struct {
	s *Service
	q groupQueue[*createJob]

	// hook, when set (tests), runs in the committer with each batch's
	// size before its transaction.
	hook func(size int)
}

func newBatcher(s *Service, max int) *batcher {
	b := &batcher{s: s}
	b.q = groupQueue[*createJob]{max: max, commit: b.commit}
	return b
}

// submit queues j and starts a committer if none is running.
func (b *batcher) submit(j *createJob) { b.q.submit(j) }

// withdraw takes j off the queue, unless a batch has taken it already.
func (b *batcher) withdraw(j *createJob) bool { return b.q.withdraw(j) }

// commit writes one batch and answers its requests.
func (b *batcher) commit(batch []*createJob) {
	s := b.s
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.IdempotencyLease)
	defer cancel()
	if b.hook != nil {
		b.hook(len(batch))
	}
	if len(batch) > 1 {
		resps, err := s.insertInvoices(ctx, batch)
		if err == nil {
			for i, j := range batch {
				j.done <- createResult{resp: resps[i]}
			}
			return
		}
		s.log.InfoContext(ctx, "invoice batch rolled back; creating its invoices one by one",
			slog.Int("count", len(batch)), slog.String("error", err.Error()))
	}
	for _, j := range batch {
		resp, err := s.insertInvoice(ctx, j)
		j.done <- createResult{resp: resp, err: err}
	}
}

// state reports how many creations wait for the committer, and whether
// one is running (for tests).
func (b *batcher) state() (queued int, running bool) { return b.q.state() }
