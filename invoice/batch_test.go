package invoice_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/store"
)

// Group commit: concurrent creations are written by one committer, many
// per transaction. These tests hold the committer inside its first batch
// (through a test hook) to line requests up in its queue, so that what
// goes into which batch is decided by the test, not by timing.

// batchGate holds the committer at its first batch until released, and
// records every batch's size.
type batchGate struct {
	entered chan struct{} // closed when the first batch is held
	release chan struct{}
	once    sync.Once
	mu      sync.Mutex
	sizes   []int
}

func holdFirstBatch(e *env) *batchGate {
	g := &batchGate{entered: make(chan struct{}), release: make(chan struct{})}
	first := true
	e.svc.SetBatchHook(func(size int) {
		g.mu.Lock()
		g.sizes = append(g.sizes, size)
		hold := first
		first = false
		g.mu.Unlock()
		if hold {
			close(g.entered)
			<-g.release
		}
	})
	return g
}

func (g *batchGate) open() { g.once.Do(func() { close(g.release) }) }

func (g *batchGate) batchSizes() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]int(nil), g.sizes...)
}

// waitQueued waits until n creations wait for the committer.
func waitQueued(t *testing.T, e *env, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		q, _ := e.svc.CreationQueue()
		return q == n
	}, 20*time.Second, time.Millisecond, "waiting for %d queued creations", n)
}

// post sends a create request under ctx and reports transport errors
// instead of failing the test (it runs on other goroutines).
func (e *env) post(ctx context.Context, apiKey, idemKey, body string) (result, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", e.srv.URL+"/v1/invoices", strings.NewReader(body))
	if err != nil {
		return result{}, err
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", idemKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return result{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return result{Status: resp.StatusCode, Header: resp.Header, Body: b}, err
}

// async sends a create request on its own goroutine.
func (e *env) async(apiKey, idemKey, body string) <-chan result {
	ch := make(chan result, 1)
	go func() {
		r, err := e.post(ctx, apiKey, idemKey, body)
		if err != nil {
			r = result{Status: -1, Body: []byte(err.Error())}
		}
		ch <- r
	}()
	return ch
}

func decodeCreated(t *testing.T, r result) createdInvoice {
	t.Helper()
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	var inv createdInvoice
	require.NoError(t, json.Unmarshal(r.Body, &inv))
	return inv
}

// requireIndexes checks that merchant's invoices hold derivation indexes
// exactly 0…n-1, each with the deriver's address, and that the counter is
// at n: no gap, no duplicate.
func requireIndexes(t *testing.T, st store.Store, merchantID int64, n int) []store.Invoice {
	t.Helper()
	invs := invoicesOf(t, st, merchantID)
	require.Len(t, invs, n)
	seen := map[uint32]bool{}
	for _, inv := range invs {
		require.False(t, seen[inv.DerivationIndex], "index %d used twice", inv.DerivationIndex)
		seen[inv.DerivationIndex] = true
		want, err := testDeriver(t).Address(inv.DerivationIndex)
		require.NoError(t, err)
		require.Equal(t, want, inv.DepositAddress, "invoice %d has the address of its index", inv.ID)
		uri, err := invoice.ParsePaymentURI(inv.PaymentURI)
		require.NoError(t, err)
		require.Equal(t, want, uri.Address)
	}
	for i := range n {
		require.True(t, seen[uint32(i)], "index %d missing: a gap", i)
	}
	next, err := st.NextDerivationIndex(ctx)
	require.NoError(t, err)
	require.EqualValues(t, n, next, "the counter is right past the last index used")
	return invs
}

func TestCreateInvoice_QueuedCreationsCommitInBatches(t *testing.T) {
	bothStores(t, func(t *testing.T, e *env) {
		m := e.newMerchant()
		g := holdFirstBatch(e)
		defer g.open()
		const n = 200
		body := func(i int) string { return fmt.Sprintf(`{"amount_wei":"%d"}`, i+1) }
		results := make([]<-chan result, n)
		results[0] = e.async(m.APIKey, "k-0", body(0))
		<-g.entered
		for i := 1; i < n; i++ {
			results[i] = e.async(m.APIKey, fmt.Sprintf("k-%d", i), body(i))
		}
		waitQueued(t, e, n-1)
		g.open()

		for i, ch := range results {
			r := <-ch
			inv := decodeCreated(t, r)
			require.Equal(t, fmt.Sprint(i+1), inv.AmountWei.String(), "each request gets its own invoice")
			require.Equal(t, fmt.Sprintf("https://pay.example.com/v1/invoices/%d/qr.png", inv.ID), inv.QRPNGURL)
			require.Equal(t, fmt.Sprintf("https://pay.example.com/v1/invoices/%d", inv.ID), r.Header.Get("Location"))
			stored, err := e.st.GetInvoice(ctx, inv.ID)
			require.NoError(t, err)
			require.Equal(t, invoice.LookupTokenHash(inv.LookupToken), stored.LookupTokenHash)
			require.Equal(t, inv.DepositAddress, stored.DepositAddress)
			if i%10 == 0 { // the response stored for the key, byte for byte
				again := e.createInvoice(m.APIKey, fmt.Sprintf("k-%d", i), body(i))
				require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
				require.Equal(t, r.Body, again.Body)
			}
		}
		require.Equal(t, []int{1, 64, 64, 64, 7}, g.batchSizes(), "the first alone, then the queue in batches of at most 64")
		requireIndexes(t, e.st, m.ID, n)
		_, running := e.svc.CreationQueue()
		require.Eventually(t, func() bool { _, running = e.svc.CreationQueue(); return !running },
			10*time.Second, time.Millisecond, "the committer stops when the queue is empty")
	})
}

func TestCreateInvoice_ManyConcurrentCreations_ContiguousIndexesWithTheirAddresses(t *testing.T) {
	for _, batch := range []int{64, 1} {
		t.Run(fmt.Sprintf("batch %d", batch), func(t *testing.T) {
			t.Parallel()
			run := func(t *testing.T, e *env) {
				a, b := e.newMerchant(), e.newMerchant()
				const workers, each = 24, 10
				var wg sync.WaitGroup
				errs := make(chan error, workers*each)
				for w := range workers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						key := a.APIKey
						if w%2 == 1 {
							key = b.APIKey
						}
						for i := range each {
							r, err := e.post(ctx, key, fmt.Sprintf("w%d-%d", w, i), oneEther)
							if err == nil && r.Status != http.StatusCreated {
								err = fmt.Errorf("status %d: %s", r.Status, r.Body)
							}
							errs <- err
						}
					}()
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					require.NoError(t, err)
				}
				all := append(invoicesOf(t, e.st, a.ID), invoicesOf(t, e.st, b.ID)...)
				require.Len(t, all, workers*each)
				seen := map[uint32]bool{}
				for _, inv := range all {
					require.False(t, seen[inv.DerivationIndex])
					seen[inv.DerivationIndex] = true
					want, err := testDeriver(t).Address(inv.DerivationIndex)
					require.NoError(t, err)
					require.Equal(t, want, inv.DepositAddress)
				}
				for i := range workers * each {
					require.True(t, seen[uint32(i)], "index %d missing: a gap", i)
				}
			}
			t.Run("postgres", func(t *testing.T) {
				t.Parallel()
				run(t, newEnv(t, func(c *invoice.Config) { c.CreateBatchSize = batch }))
			})
			t.Run("sqlite", func(t *testing.T) {
				t.Parallel()
				run(t, newEnvOn(t, newSQLite(t), func(c *invoice.Config) { c.CreateBatchSize = batch }))
			})
		})
	}
}

func TestCreateInvoice_TwoReplicas_ShareTheIndexesWithoutGapOrDuplicate(t *testing.T) {
	t.Parallel()
	st := newPostgres(t)
	replicas := []*env{newEnvOn(t, st), newEnvOn(t, st)}
	m := replicas[0].newMerchant()
	const workers, each = 16, 10
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := replicas[w%2]
			for i := range each {
				r, err := e.post(ctx, m.APIKey, fmt.Sprintf("w%d-%d", w, i), oneEther)
				if err == nil && r.Status != http.StatusCreated {
					err = fmt.Errorf("status %d: %s", r.Status, r.Body)
				}
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	requireIndexes(t, st, m.ID, workers*each)
}

func TestCreateInvoice_BatchMemberWhoseLeaseWasTakenOver_FailsAlone(t *testing.T) {
	bothStores(t, func(t *testing.T, e *env) {
		m := e.newMerchant()
		g := holdFirstBatch(e)
		defer g.open()
		x := e.async(m.APIKey, "x", oneEther)
		<-g.entered
		a := e.async(m.APIKey, "a", oneEther)
		waitQueued(t, e, 1)
		b := e.async(m.APIKey, "b", oneEther)
		waitQueued(t, e, 2)
		c := e.async(m.APIKey, "c", oneEther)
		waitQueued(t, e, 3)

		// While b waits, its lease ends and another request (another
		// replica's retry) takes the key over.
		rec, err := e.st.GetIdempotencyRecord(ctx, m.ID, "b")
		require.NoError(t, err)
		takeover := rec
		takeover.LockedUntil = rec.LockedUntil.Add(time.Hour)
		require.NoError(t, e.st.ClaimIdempotencyRecord(ctx, takeover, rec.LockedUntil))
		g.open()

		ix, ia, ic := decodeCreated(t, <-x), decodeCreated(t, <-a), decodeCreated(t, <-c)
		rb := <-b
		requireProblem(t, rb, 409, "idempotency_key_in_flight", "")
		require.Equal(t, "1", rb.Header.Get("Retry-After"))
		require.Equal(t, []int{1, 3}, g.batchSizes())

		invs := requireIndexes(t, e.st, m.ID, 3)
		byID := map[int64]uint32{}
		for _, inv := range invs {
			byID[inv.ID] = inv.DerivationIndex
		}
		require.EqualValues(t, 0, byID[ix.ID])
		require.EqualValues(t, 1, byID[ia.ID])
		require.EqualValues(t, 2, byID[ic.ID], "the others keep their order, with no gap")

		// b's key is still held by the request that took it over.
		got, err := e.st.GetIdempotencyRecord(ctx, m.ID, "b")
		require.NoError(t, err)
		require.Equal(t, store.IdempotencyInFlight, got.Status)
		require.True(t, got.LockedUntil.Equal(takeover.LockedUntil))
		for key, first := range map[string]createdInvoice{"a": ia, "c": ic} {
			again := e.createInvoice(m.APIKey, key, oneEther)
			require.Equal(t, http.StatusCreated, again.Status)
			require.Equal(t, first.ID, decodeCreated(t, again).ID)
		}
	})
}

func TestCreateInvoice_BatchOutrunningTheWallet_CreatesWhatFits(t *testing.T) {
	t.Parallel()
	st := newPostgres(t)
	e := newEnvOn(t, st)
	m := e.newMerchant()
	const last = 1<<31 - 1 // the last non-hardened index
	_, err := st.DB().Exec(`UPDATE counters SET value = $1 WHERE name = 'derivation_index'`, last-2)
	require.NoError(t, err)
	g := holdFirstBatch(e)
	defer g.open()
	x := e.async(m.APIKey, "x", oneEther)
	<-g.entered
	var queued []<-chan result
	for i, key := range []string{"a", "b", "c"} {
		queued = append(queued, e.async(m.APIKey, key, oneEther))
		waitQueued(t, e, i+1)
	}
	g.open()

	require.Equal(t, http.StatusCreated, (<-x).Status)
	ia, ib := decodeCreated(t, <-queued[0]), decodeCreated(t, <-queued[1])
	requireProblem(t, <-queued[2], 500, "internal", "")
	require.Equal(t, []int{1, 3}, g.batchSizes())
	for inv, idx := range map[createdInvoice]uint32{ia: last - 1, ib: last} {
		want, err := testDeriver(t).Address(idx)
		require.NoError(t, err)
		require.Equal(t, want, inv.DepositAddress, "the batch that did not fit was retried one by one")
	}
	_, err = st.GetIdempotencyRecord(ctx, m.ID, "c")
	require.ErrorIs(t, err, store.ErrNotFound, "the request that failed freed its key")
	require.Len(t, invoicesOf(t, st, m.ID), 3)
}

func TestCreateInvoice_ClientGoneWhileQueued_NothingCreatedKeyFreed(t *testing.T) {
	bothStores(t, func(t *testing.T, e *env) {
		m := e.newMerchant()
		g := holdFirstBatch(e)
		defer g.open()
		x := e.async(m.APIKey, "x", oneEther)
		<-g.entered

		qctx, cancel := context.WithCancel(ctx)
		gone := make(chan error, 1)
		go func() {
			_, err := e.post(qctx, m.APIKey, "q", oneEther)
			gone <- err
		}()
		waitQueued(t, e, 1)
		cancel() // the client disconnects
		require.ErrorIs(t, <-gone, context.Canceled)
		// Withdrawn from the queue, and its key freed.
		waitQueued(t, e, 0)
		require.Eventually(t, func() bool {
			_, err := e.st.GetIdempotencyRecord(ctx, m.ID, "q")
			return err != nil
		}, 10*time.Second, time.Millisecond)
		_, err := e.st.GetIdempotencyRecord(ctx, m.ID, "q")
		require.ErrorIs(t, err, store.ErrNotFound)

		g.open()
		decodeCreated(t, <-x)
		require.Equal(t, []int{1}, g.batchSizes(), "the withdrawn request never reached a batch")
		// The client's retry creates the invoice, at the next index.
		e.mustCreate(m.APIKey, "q", oneEther)
		requireIndexes(t, e.st, m.ID, 2)
	})
}

func TestCreateInvoice_ClientGoneDuringItsBatch_InvoiceCommittedAndReplayed(t *testing.T) {
	bothStores(t, func(t *testing.T, e *env) {
		m := e.newMerchant()
		g := holdFirstBatch(e)
		defer g.open()
		qctx, cancel := context.WithCancel(ctx)
		gone := make(chan error, 1)
		go func() {
			_, err := e.post(qctx, m.APIKey, "q", oneEther)
			gone <- err
		}()
		<-g.entered // its transaction is about to start
		cancel()
		require.ErrorIs(t, <-gone, context.Canceled)
		g.open()

		// The batch's outcome stands: the invoice exists and the retry
		// gets the response it would have had.
		require.Eventually(t, func() bool {
			rec, err := e.st.GetIdempotencyRecord(ctx, m.ID, "q")
			return err == nil && rec.Status == store.IdempotencyDone
		}, 10*time.Second, time.Millisecond)
		first := e.createInvoice(m.APIKey, "q", oneEther)
		inv := decodeCreated(t, first)
		require.Equal(t, "true", first.Header.Get("Idempotent-Replayed"))
		again := e.createInvoice(m.APIKey, "q", oneEther)
		require.Equal(t, first.Body, again.Body)
		stored := requireIndexes(t, e.st, m.ID, 1)
		require.Equal(t, inv.ID, stored[0].ID)
		require.Equal(t, invoice.LookupTokenHash(inv.LookupToken), stored[0].LookupTokenHash,
			"the replay holds the invoice's once-shown lookup token")
	})
}

func TestCreateInvoice_ShutdownDrainsTheQueue(t *testing.T) {
	bothStores(t, func(t *testing.T, e *env) {
		m := e.newMerchant()
		g := holdFirstBatch(e)
		defer g.open()
		const n = 20
		results := make([]<-chan result, n)
		results[0] = e.async(m.APIKey, "k-0", oneEther)
		<-g.entered
		for i := 1; i < n; i++ {
			results[i] = e.async(m.APIKey, fmt.Sprintf("k-%d", i), oneEther)
		}
		waitQueued(t, e, n-1)

		// The host shuts down: no new connections, in-flight requests
		// finish.
		stopped := make(chan error, 1)
		go func() { stopped <- e.srv.Config.Shutdown(context.Background()) }()
		addr := e.srv.Listener.Addr().String()
		require.Eventually(t, func() bool {
			c, err := net.Dial("tcp", addr)
			if err == nil {
				c.Close()
			}
			return err != nil
		}, 10*time.Second, time.Millisecond, "the listener closes")
		g.open()
		require.NoError(t, <-stopped)

		for _, ch := range results {
			decodeCreated(t, <-ch)
		}
		queued, running := e.svc.CreationQueue()
		require.Zero(t, queued)
		require.Eventually(t, func() bool { _, running = e.svc.CreationQueue(); return !running },
			10*time.Second, time.Millisecond, "no committer outlives the requests")
		require.Equal(t, []int{1, n - 1}, g.batchSizes())
		requireIndexes(t, e.st, m.ID, n)
	})
}

func TestNew_CreateBatchSizeBounds(t *testing.T) {
	t.Parallel()
	creds, err := invoice.NewCredentials(testSecretKey)
	require.NoError(t, err)
	st := newSQLite(t)
	for _, n := range []int{0, 1, 64, 1000} {
		_, err := invoice.New(st, creds, testDeriver(t), chainID, invoice.Config{CreateBatchSize: n})
		require.NoError(t, err, "CreateBatchSize %d", n)
	}
	for _, n := range []int{-1, 1001} {
		_, err := invoice.New(st, creds, testDeriver(t), chainID, invoice.Config{CreateBatchSize: n})
		require.ErrorContains(t, err, "CreateBatchSize", "CreateBatchSize %d", n)
	}
}
