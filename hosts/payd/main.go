// Command payd is evmpay's reference host: one binary that runs the invoice
// API, the gateway (RPC proxy, indexer, read API) and the workers
// (settlement, sweep, webhooks), built only from the library's packages.
//
//	payd dev                      everything in one process, no set-up
//	payd serve --roles …          production mode on PostgreSQL
//	payd devchain                 the dev chain alone (for serve)
//	payd pay <ethereum:… URI>     pay a payment request from a dev account
//	payd migrate                  apply database migrations
//	payd merchants create …       create a merchant, print its credentials
//	payd dashboard-user …         give a merchant a dashboard user, print a sign-in link
//	payd xpub                     print the deposit account's xpub
//	payd reconcile                compare the ledger with the chain
//
// Run `payd help` for the flags of each.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		var u usageError
		if errors.As(err, &u) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}
