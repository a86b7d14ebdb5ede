package invoice

import (
	"slices"
	"sync"
)

// groupQueue is the queue behind a group commit: callers submit jobs, and
// one goroutine, running only while jobs are queued, hands whatever is
// queued (at most max, with no wait beyond the group in progress) to
// commit, group after group, until the queue is empty. commit answers every
// job of its group. The invoice committer (batch.go) and the
// Idempotency-Key committer (keys.go) are two.
type groupQueue[J comparable] struct {
	max    int
	commit func(group []J)

	mu      sync.Mutex
	queue   []J
	running bool // a committer goroutine is running
}

// submit queues j and starts a committer if none is running.
func (q *groupQueue[J]) submit(j J) {
	q.mu.Lock()
	q.queue = append(q.queue, j)
	start := !q.running
	q.running = true
	q.mu.Unlock()
	if start {
		go q.run()
	}
}

// withdraw takes j off the queue, unless a group has taken it already
// (then its commit will answer it).
func (q *groupQueue[J]) withdraw(j J) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	i := slices.Index(q.queue, j)
	if i < 0 {
		return false
	}
	q.queue = slices.Delete(q.queue, i, i+1)
	return true
}

// next takes the next group off the queue; nil (and the committer stops)
// when the queue is empty.
func (q *groupQueue[J]) next() []J {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := min(len(q.queue), q.max)
	if n == 0 {
		q.running = false
		q.queue = nil
		return nil
	}
	group := slices.Clone(q.queue[:n])
	q.queue = slices.Delete(q.queue, 0, n)
	return group
}

// run is the committer: it commits groups until the queue is empty.
func (q *groupQueue[J]) run() {
	for group := q.next(); group != nil; group = q.next() {
		q.commit(group)
	}
}

// state reports how many jobs are queued and whether a committer is
// running (for tests).
func (q *groupQueue[J]) state() (queued int, running bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queue), q.running
}
