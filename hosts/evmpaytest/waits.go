package evmpaytest

import (
	"context"
	"errors"
	"fmt"

	"github.com/ethereum/go-ethereum/common"

	"github.com/evmpay/evmpay/store"
)

// MaxBlocks is how many blocks WaitInvoice mines at most before it gives
// up: far more than a payment, its confirmations, a sweep and the sweep's
// confirmations take at the default 12 confirmations.
const MaxBlocks = 500

// Sync waits until the indexer and settlement have processed the chain's
// head block (their cursors in the store name its number and hash): every
// payment up to the head is recorded. It mines nothing. Settlement
// confirms invoices just after it moves its cursor, so an invoice may
// still become CONFIRMED after Sync returns: to wait for a status, use
// WaitInvoice. Whatever runs the indexer and settlement — Env's own
// packages or the test's — must be running.
func (e *Env) Sync() {
	e.tb.Helper()
	e.cfg.Wait.Until(e.tb, "the indexer and settlement at the chain's head", func() (bool, any) {
		e.failIfStopped()
		if e.cfg.Manual {
			e.Step()
		}
		return e.caughtUp(e.head())
	})
}

// WaitInvoice waits until invoice id has status (store.StatusPaid,
// store.StatusConfirmed, store.StatusSettled, …) and returns it, mining
// blocks as it waits: each time the indexer and settlement have processed
// the chain's head and the invoice is not there yet, it mines one block.
// So a block comes only once the previous one was settled, as on a chain
// whose blocks are slower than evmpay; it may mine a block more than
// strictly needed (settlement confirms invoices just after it moves its
// cursor). It fails the test with what it last saw after MaxBlocks blocks
// or Config.Wait's timeout.
func (e *Env) WaitInvoice(id int64, status string) store.Invoice {
	e.tb.Helper()
	var (
		inv   store.Invoice
		mined int
	)
	what := fmt.Sprintf("invoice %d %s", id, status)
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
		inv, err = e.Store.GetInvoice(context.Background(), id)
		if err != nil {
			e.tb.Fatalf("evmpaytest: invoice %d: %v", id, err)
		}
		if inv.Status == status {
			return true, nil
		}
		if mined >= MaxBlocks {
			e.tb.Fatalf("evmpaytest: %s: not after %d blocks; last seen: %s", what, mined, describe(inv))
		}
		e.Chain.Mine(1)
		mined++
		return false, fmt.Sprintf("%s at block %d; %d blocks mined", describe(inv), head.BlockNumber, mined)
	})
	return inv
}

// describe is what a failure message says of an invoice.
func describe(inv store.Invoice) string {
	s := fmt.Sprintf("invoice %d %s paid %s of %s", inv.ID, inv.Status, inv.PaidWei, inv.AmountWei)
	if inv.SweepStatus != "" && inv.SweepStatus != store.SweepNone {
		s += ", sweep " + inv.SweepStatus
	}
	if inv.SweepError != "" {
		s += " (" + inv.SweepError + ")"
	}
	return s
}

// head is the chain's head block as a cursor would name it.
func (e *Env) head() store.Cursor {
	e.tb.Helper()
	h, err := e.Chain.Client().HeaderByNumber(context.Background(), nil)
	if err != nil {
		e.tb.Fatalf("evmpaytest: head: %v", err)
	}
	return store.Cursor{BlockNumber: h.Number.Uint64(), BlockHash: h.Hash()}
}

// caughtUp reports whether the indexer's and settlement's cursors are at
// head, and otherwise where they are.
func (e *Env) caughtUp(head store.Cursor) (bool, string) {
	e.tb.Helper()
	var at [2]string
	ok := true
	for i, name := range []string{store.CursorIndexer, store.CursorSettlement} {
		c, err := e.Store.GetCursor(context.Background(), name)
		switch {
		case errors.Is(err, store.ErrNotFound):
			at[i], ok = "nowhere", false
		case err != nil:
			e.tb.Fatalf("evmpaytest: cursor %s: %v", name, err)
		default:
			at[i] = fmt.Sprint(c.BlockNumber)
			ok = ok && c.BlockNumber == head.BlockNumber && c.BlockHash == head.BlockHash
		}
	}
	return ok, fmt.Sprintf("head %d %s, indexer at %s, settlement at %s", head.BlockNumber, short(head.BlockHash), at[0], at[1])
}

func short(h common.Hash) string { return h.Hex()[:10] }

// failIfStopped fails the test when one of Env's packages stopped with an
// error: nothing will move any more.
func (e *Env) failIfStopped() {
	e.tb.Helper()
	e.mu.Lock()
	err := e.stopped
	e.mu.Unlock()
	if err != nil {
		e.tb.Fatalf("evmpaytest: %v", err)
	}
}
