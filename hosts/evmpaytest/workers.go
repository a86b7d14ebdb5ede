package evmpaytest

import (
	"context"
	"errors"
	"fmt"
)

// Go runs a worker of the test's own — the host's hosts/service Run, its
// own indexer — until the test ends (then its context is cancelled and Go
// waits for it to return). When it stops with an error before that, every
// wait of the Env (Sync, WaitInvoice, WaitOutbound) fails at once with
// that error, instead of polling on until its timeout; the test fails
// too.
func (e *Env) Go(name string, run func(ctx context.Context) error) {
	e.tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		err := run(ctx)
		if err != nil && ctx.Err() == nil && !errors.Is(err, context.Canceled) {
			e.mu.Lock()
			if e.stopped == nil {
				e.stopped = fmt.Errorf("the %s worker stopped: %w", name, err)
			}
			e.mu.Unlock()
		}
		done <- err
	}()
	e.tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			e.mu.Lock()
			stopped := e.stopped
			e.mu.Unlock()
			if stopped != nil {
				e.tb.Errorf("evmpaytest: %v", stopped)
			}
		}
	})
}
