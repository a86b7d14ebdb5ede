package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// archiveBatch is what payd's archive job moves per call (hosts/payd
// runArchive).
const archiveBatch = 1000

// runArchive moves the oldest month of invoices to invoices_archive as
// payd's archive job does — ArchiveInvoices in batches of 1,000 until a
// call moves none — while one client sends the -load reads (every case in
// turn, sequentially). The same reads are first measured for before, with
// the database idle otherwise. It reports archive rows/s and the reads'
// p50/p99 before and during. Reads draw invoices above the archived month
// only: an archived invoice is no longer served.
func runArchive(ctx context.Context, dbURL, keyfile string, before time.Duration) error {
	st, err := openStore(ctx, dbURL)
	if err != nil {
		return err
	}
	defer st.Close()
	env, err := newLoadEnv(ctx, st, keyfile)
	if err != nil {
		return err
	}
	defer env.close()
	// The month: 30 days from the oldest invoice the archive would move
	// (older ones that stay — unswept, paid late — do not count).
	var oldest time.Time
	if err := st.DB().QueryRowContext(ctx, `SELECT MIN(created_at) FROM invoices WHERE NOT needs_attention
		AND (status = 'SETTLED' OR (status = 'EXPIRED' AND paid_wei = 0))`).Scan(&oldest); err != nil {
		return err
	}
	cutoff := oldest.Add(30 * 24 * time.Hour)
	var lo, eligible int
	if err := st.DB().QueryRowContext(ctx, `SELECT COALESCE(MIN(id), 1) FROM invoices WHERE created_at >= $1`, cutoff).Scan(&lo); err != nil {
		return err
	}
	if err := st.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM invoices WHERE created_at < $1 AND NOT needs_attention
		AND (status = 'SETTLED' OR (status = 'EXPIRED' AND paid_wei = 0))`, cutoff).Scan(&eligible); err != nil {
		return err
	}
	cases := env.cases(rand.New(rand.NewPCG(7, 8)), lo)
	fmt.Printf("archive: invoices created before %s (%d to move, reads from id %d up)\n\n", cutoff.Format(time.RFC3339), eligible, lo)

	deadline := time.Now().Add(before)
	idle, err := readWhile(ctx, env, cases, func() bool { return time.Now().Before(deadline) })
	if err != nil {
		return err
	}

	type result struct {
		moved   int
		batches []time.Duration
		took    time.Duration
		err     error
	}
	done := make(chan result, 1)
	go func() {
		var res result
		start := time.Now()
		for {
			t := time.Now()
			n, err := st.ArchiveInvoices(ctx, cutoff, archiveBatch)
			if err != nil {
				res.err = err
				break
			}
			res.batches = append(res.batches, time.Since(t))
			res.moved += n
			if n == 0 {
				break
			}
		}
		res.took = time.Since(start)
		done <- res
	}()
	var res result
	finished := false
	during, err := readWhile(ctx, env, cases, func() bool {
		if finished {
			return false
		}
		select {
		case res = <-done:
			finished = true
			return false
		default:
			return true
		}
	})
	if !finished {
		res = <-done
	}
	if err != nil {
		return err
	}
	if res.err != nil {
		return res.err
	}
	if res.moved != eligible {
		return fmt.Errorf("archive: moved %d of %d invoices", res.moved, eligible)
	}
	// The last two calls: the one that found less than a batch, and the
	// one that found none.
	last := [2]time.Duration{}
	copy(last[:], res.batches[max(0, len(res.batches)-2):])
	b50, b99 := percentiles(res.batches)
	fmt.Printf("archive: %d invoices in %s: %.0f rows/s; %d calls, p50 %s, p99 %s, the last two %s and %s\n\n",
		res.moved, res.took.Round(time.Millisecond), float64(res.moved)/res.took.Seconds(), len(res.batches),
		ms(b50), ms(b99), ms(last[0]), ms(last[1]))
	fmt.Printf("| request | before p50 / p99 | during p50 / p99 |\n|---|---|---|\n")
	var allIdle, allDuring []time.Duration
	for _, c := range cases {
		i50, i99 := percentiles(idle[c.name])
		d50, d99 := percentiles(during[c.name])
		fmt.Printf("| %s | %s / %s | %s / %s |\n", c.name, ms(i50), ms(i99), ms(d50), ms(d99))
		allIdle, allDuring = append(allIdle, idle[c.name]...), append(allDuring, during[c.name]...)
	}
	i50, i99 := percentiles(allIdle)
	d50, d99 := percentiles(allDuring)
	fmt.Printf("| all reads (%d before, %d during) | %s / %s | %s / %s |\n", len(allIdle), len(allDuring), ms(i50), ms(i99), ms(d50), ms(d99))
	return nil
}

// readWhile sends the cases' requests in turn, one at a time, while more
// says so, and returns each case's durations.
func readWhile(ctx context.Context, env *loadEnv, cases []loadCase, more func() bool) (map[string][]time.Duration, error) {
	took := map[string][]time.Duration{}
	for i := 0; more(); i++ {
		c := cases[i%len(cases)]
		d, err := env.do(ctx, c)
		if err != nil {
			return took, err
		}
		took[c.name] = append(took[c.name], d)
	}
	return took, nil
}
