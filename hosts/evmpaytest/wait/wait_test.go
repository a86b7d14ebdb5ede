package wait_test

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/evmpaytest/wait"
)

// fakeTB records a failure; deadline, when set, is the test binary's.
type fakeTB struct {
	failure  string
	deadline time.Time
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failure = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

type deadlineTB struct{ *fakeTB }

func (d deadlineTB) Deadline() (time.Time, bool) { return d.deadline, true }

// run runs f as a test body would (Fatalf ends its goroutine).
func run(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
}

func TestUntil_ReturnsOnceTheConditionHolds(t *testing.T) {
	t.Parallel()
	calls := 0
	wait.Until(t, "three calls", func() (bool, any) {
		calls++
		return calls == 3, calls
	})
	require.Equal(t, 3, calls, "polled until done, then no more")
}

func TestUntil_FailsWithWhatItWaitedForAndTheLastValueSeen(t *testing.T) {
	t.Parallel()
	for seen, want := range map[any]string{
		nil:                        "nothing",
		"a string":                 "a string",
		errors.New("an error"):     "an error",
		struct{ N int }{N: 7}:      "{N:7}",
		time.Duration(time.Second): "1s",
	} {
		tb := &fakeTB{}
		run(func() {
			wait.Poll{Timeout: 20 * time.Millisecond, Interval: time.Millisecond}.Until(tb, "the thing",
				func() (bool, any) { return false, seen })
		})
		require.Equal(t, "not within 20ms: the thing; last seen: "+want, tb.failure)
	}
}

// A wait ends before the test binary's deadline, so that its failure is
// reported instead of go test's panic.
func TestUntil_EndsBeforeTheTestBinarysDeadline(t *testing.T) {
	t.Parallel()
	tb := deadlineTB{&fakeTB{deadline: time.Now().Add(200 * time.Millisecond)}}
	polls := 0
	run(func() {
		wait.Poll{Timeout: time.Hour}.Until(tb, "forever", func() (bool, any) { polls++; return false, polls })
	})
	require.Regexp(t, `^not within 1\d\dms: forever; last seen: \d+$`, tb.failure)
	require.Positive(t, polls)
}
