package evmpaytest

import (
	"context"
	"fmt"

	"github.com/evmpay/evmpay/store"
)

// WaitOutbound waits until refund or payout id has status
// (store.OutboundConfirmed, …) and returns it, mining a block each time the
// indexer and settlement have processed the chain's head and it is not
// there yet — as WaitInvoice does for invoices. It fails the test at once
// when the outbound ends otherwise (FAILED or CANCELLED, unless that is the
// status waited for), when a worker stopped (Env's, or one started with
// Go), after MaxBlocks blocks, or after Config.Wait's timeout.
func (e *Env) WaitOutbound(id int64, status string) store.Outbound {
	e.tb.Helper()
	var (
		o     store.Outbound
		mined int
	)
	what := fmt.Sprintf("outbound %d %s", id, status)
	e.cfg.Wait.Until(e.tb, what, func() (bool, any) {
		e.failIfStopped()
		if e.cfg.Manual {
			e.Step()
		}
		head := e.head()
		ok, seen := e.caughtUp(head)
		if !ok {
			return false, fmt.Sprintf("%s; %d blocks mined", seen, mined)
		}
		var err error
		if o, err = e.Store.GetOutbound(context.Background(), id); err != nil {
			e.tb.Fatalf("evmpaytest: outbound %d: %v", id, err)
		}
		if o.Status == status {
			return true, nil
		}
		if o.Status == store.OutboundFailed || o.Status == store.OutboundCancelled {
			e.tb.Fatalf("evmpaytest: %s: it ended %s: %s", what, o.Status, o.Error)
		}
		if mined >= MaxBlocks {
			e.tb.Fatalf("evmpaytest: %s: not after %d blocks; last seen: %s %s", what, mined, o.Status, o.Error)
		}
		e.Chain.Mine(1)
		mined++
		return false, fmt.Sprintf("%s %q at block %d; %d blocks mined", o.Status, o.Error, head.BlockNumber, mined)
	})
	return o
}
