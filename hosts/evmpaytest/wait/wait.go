// Package wait polls until a condition holds, in the test's own goroutine,
// and fails the test with what it last saw when it never does.
//
//	wait.Until(t, "delivery 7 attempted twice", func() (bool, any) {
//		d, err := st.GetDelivery(ctx, 7)
//		require.NoError(t, err)
//		return d.Attempt >= 2, d
//	})
//
// Unlike require.Eventually, the condition runs in the calling goroutine: it
// may stop the test itself (require inside it is fine), no poll is still
// running when the failure is reported, and the failure message is built
// from what the last poll saw, not from values captured before the first.
//
// The timeout bounds a test that would otherwise hang; it is not an
// assertion about speed: pick it generously. The package imports nothing of
// evmpay, so that every package's own (internal) tests can use it.
package wait

import (
	"cmp"
	"fmt"
	"time"
)

// TB is the part of testing.TB that Until uses.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Poll is how a condition is polled. The zero value is usable.
type Poll struct {
	// Timeout is how long Until polls before failing the test. It is cut
	// short to end a little before the test binary's own deadline (go test
	// -timeout), so that the failure names the condition instead of
	// panicking with every goroutine's stack. Defaults to 2 minutes.
	Timeout time.Duration
	// Interval is the pause between two polls. Defaults to 5 ms.
	Interval time.Duration
}

// DefaultTimeout is Poll.Timeout's default.
const DefaultTimeout = 2 * time.Minute

// DefaultInterval is Poll.Interval's default.
const DefaultInterval = 5 * time.Millisecond

// Until polls cond with the default Poll: see Poll.Until.
func Until(tb TB, what string, cond func() (done bool, seen any)) {
	tb.Helper()
	Poll{}.Until(tb, what, cond)
}

// Until calls cond until it reports done, pausing p.Interval between
// calls. After p.Timeout (or less, see Poll.Timeout) it fails the test
// with
//
//	not within <timeout>: <what>; last seen: <seen>
//
// seen being what the last call returned beside false (formatted with %+v;
// a string is printed as it is).
func (p Poll) Until(tb TB, what string, cond func() (done bool, seen any)) {
	tb.Helper()
	timeout := cmp.Or(p.Timeout, DefaultTimeout)
	start := time.Now()
	deadline := start.Add(timeout)
	if d, ok := tb.(interface{ Deadline() (time.Time, bool) }); ok {
		if end, ok := d.Deadline(); ok {
			// Leave the test binary time to report the failure.
			if early := end.Add(-time.Until(end) / 10); early.Before(deadline) {
				deadline = early
				timeout = deadline.Sub(start).Round(time.Millisecond)
			}
		}
	}
	interval := cmp.Or(p.Interval, DefaultInterval)
	for {
		done, seen := cond()
		if done {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("not within %v: %s; last seen: %s", timeout, what, describe(seen))
			return
		}
		time.Sleep(interval)
	}
}

func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "nothing"
	case string:
		return v
	case fmt.Stringer:
		return v.String()
	case error:
		return v.Error()
	}
	return fmt.Sprintf("%+v", v)
}
