package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/evmpay/evmpay/store"
)

// schemaStore is a database whose schema version can be read
// (postgres.Store and sqlite.Store).
type schemaStore interface {
	SchemaVersion(ctx context.Context) (int, error)
	GetChainIdentity(ctx context.Context) (store.ChainIdentity, error)
}

// errReplica marks a read replica that is not a replica of the primary
// (or not yet caught up with it).
var errReplica = errors.New("the read replica does not match the primary")

// checkReplica compares a read replica (DATABASE_READ_URL) with the
// primary: the same schema version and the same chain. An empty database,
// another service's or another chain's data would answer reads wrongly
// while /readyz said ready.
func checkReplica(ctx context.Context, primary, replica store.Store) error {
	p, ok1 := primary.(schemaStore)
	r, ok2 := replica.(schemaStore)
	if !ok1 || !ok2 {
		return nil // a store that cannot tell its schema (an embedder's)
	}
	pv, err := p.SchemaVersion(ctx)
	if err != nil {
		return fmt.Errorf("primary: %w", err)
	}
	rv, err := r.SchemaVersion(ctx)
	if err != nil {
		return fmt.Errorf("%w: %v (is DATABASE_READ_URL an empty database?)", errReplica, err)
	}
	if rv != pv {
		return fmt.Errorf("%w: its schema is version %d, the primary's %d (a replica still catching up, or another database)", errReplica, rv, pv)
	}
	pid, perr := p.GetChainIdentity(ctx)
	rid, rerr := r.GetChainIdentity(ctx)
	switch {
	case errors.Is(perr, store.ErrNotFound):
		return nil // nothing recorded yet on the primary: nothing to compare
	case perr != nil:
		return fmt.Errorf("primary: %w", perr)
	case errors.Is(rerr, store.ErrNotFound):
		return fmt.Errorf("%w: it holds no chain identity, the primary holds chain %d", errReplica, pid.ChainID)
	case rerr != nil:
		return fmt.Errorf("%w: %v", errReplica, rerr)
	case rid.ChainID != pid.ChainID || rid.GenesisNumber != pid.GenesisNumber || rid.GenesisHash != pid.GenesisHash:
		return fmt.Errorf("%w: it holds chain %d (first block %d %s), the primary chain %d (first block %d %s)", errReplica,
			rid.ChainID, rid.GenesisNumber, rid.GenesisHash.Hex(), pid.ChainID, pid.GenesisNumber, pid.GenesisHash.Hex())
	}
	return nil
}

// replicaCatchUp is how long a start waits for a replica that is behind
// the primary's schema (a migration the replica has not replayed yet).
const replicaCatchUp = 10 * time.Second

// checkReplicaAtStart is checkReplica, retried for replicaCatchUp while the
// replica does not match yet.
func checkReplicaAtStart(ctx context.Context, primary, replica store.Store) error {
	deadline := time.Now().Add(replicaCatchUp)
	for {
		err := checkReplica(ctx, primary, replica)
		if err == nil || !errors.Is(err, errReplica) || time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("DATABASE_READ_URL: %w; point it at a read replica of DATABASE_URL", err)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
