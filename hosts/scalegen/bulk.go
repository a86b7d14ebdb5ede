package main

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"math/rand/v2"
	"time"

	"github.com/lib/pq"
	"golang.org/x/sync/errgroup"
)

// Bulk loading. A B-tree on a random key (a transaction's hash, an
// address) that is maintained row by row while tens of millions of rows
// arrive outgrows the cache and turns every insert into random reads: the
// first scale-1 run slowed from 10k to 7k transactions/s that way and did
// not finish. So a table is loaded the way PostgreSQL's documentation
// advises for a bulk load: its indexes dropped, the rows COPYed, then each
// index built once, by sorting.
//
// The dropped definitions are saved in the database itself (table
// scalegen_indexes) before anything is dropped, so that an interrupted
// generation still has them: every run starts by building whatever is
// saved (restoreIndexes), -resume included.

// withoutIndexes runs load with table's indexes dropped and builds them
// again afterwards. An index that backs a constraint other tables'
// foreign keys point at stays (it cannot be dropped without them).
func withoutIndexes(ctx context.Context, db *sql.DB, table string, load func() error) error {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS scalegen_indexes (
			tbl TEXT NOT NULL, name TEXT PRIMARY KEY, def TEXT NOT NULL, constraint_type "char")`); err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	// Each index of the table, with the constraint it backs, if any.
	if _, err := tx.ExecContext(ctx, `INSERT INTO scalegen_indexes (tbl, name, def, constraint_type)
		SELECT $1::text, i.indexname, i.indexdef, c.contype
		FROM pg_indexes i
		LEFT JOIN pg_constraint c ON c.conindid = (quote_ident(i.schemaname) || '.' || quote_ident(i.indexname))::regclass
			AND c.contype IN ('p', 'u') AND c.conrelid = $1::text::regclass
		WHERE i.schemaname = current_schema() AND i.tablename = $1::text
		  AND NOT EXISTS (SELECT 1 FROM pg_constraint f WHERE f.contype = 'f'
			AND f.conindid = (quote_ident(i.schemaname) || '.' || quote_ident(i.indexname))::regclass)`, table); err != nil {
		return err
	}
	rows, err := tx.QueryContext(ctx, `SELECT name, constraint_type IS NOT NULL FROM scalegen_indexes WHERE tbl = $1`, table)
	if err != nil {
		return err
	}
	var drops []string
	for rows.Next() {
		var name string
		var constraint bool
		if err := rows.Scan(&name, &constraint); err != nil {
			return err
		}
		if constraint {
			drops = append(drops, `ALTER TABLE `+pq.QuoteIdentifier(table)+` DROP CONSTRAINT `+pq.QuoteIdentifier(name))
		} else {
			drops = append(drops, `DROP INDEX `+pq.QuoteIdentifier(name))
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, d := range drops {
		if _, err := tx.ExecContext(ctx, d); err != nil {
			return fmt.Errorf("%s: %w", d, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	log.Printf("  %s: %d indexes dropped for the load (saved in scalegen_indexes)", table, len(drops))
	if err := load(); err != nil {
		return err
	}
	return restoreIndexes(ctx, db)
}

// restoreIndexes builds every index saved by withoutIndexes, and the
// primary key or unique constraint it backed, then forgets it.
func restoreIndexes(ctx context.Context, db *sql.DB) error {
	var exists bool
	if err := db.QueryRowContext(ctx, `SELECT to_regclass('scalegen_indexes') IS NOT NULL`).Scan(&exists); err != nil || !exists {
		return err
	}
	type saved struct {
		table, name, def string
		constraint       sql.NullString
	}
	rows, err := db.QueryContext(ctx, `SELECT tbl, name, def, constraint_type::text FROM scalegen_indexes ORDER BY tbl, name`)
	if err != nil {
		return err
	}
	var all []saved
	for rows.Next() {
		var s saved
		if err := rows.Scan(&s.table, &s.name, &s.def, &s.constraint); err != nil {
			return err
		}
		all = append(all, s)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	// Sorts in memory, two workers per build (the machine's cores).
	if _, err := db.ExecContext(ctx, `SET maintenance_work_mem = '1GB'`); err != nil {
		return err
	}
	for _, s := range all {
		t := time.Now()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		stmts := []string{`SET LOCAL maintenance_work_mem = '1GB'`, `SET LOCAL max_parallel_maintenance_workers = 2`,
			`DROP INDEX IF EXISTS ` + pq.QuoteIdentifier(s.name), s.def}
		switch s.constraint.String {
		case "p":
			stmts = append(stmts, `ALTER TABLE `+pq.QuoteIdentifier(s.table)+` ADD CONSTRAINT `+pq.QuoteIdentifier(s.name)+
				` PRIMARY KEY USING INDEX `+pq.QuoteIdentifier(s.name))
		case "u":
			stmts = append(stmts, `ALTER TABLE `+pq.QuoteIdentifier(s.table)+` ADD CONSTRAINT `+pq.QuoteIdentifier(s.name)+
				` UNIQUE USING INDEX `+pq.QuoteIdentifier(s.name))
		}
		stmts = append(stmts, `DELETE FROM scalegen_indexes WHERE name = '`+s.name+`'`)
		for _, q := range stmts {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				tx.Rollback()
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		log.Printf("  %s: index %s built in %s", s.table, s.name, time.Since(t).Round(time.Millisecond))
	}
	_, err = db.ExecContext(ctx, `DROP TABLE IF EXISTS scalegen_indexes`)
	return err
}

// copyParallel COPYs n rows into table from workers connections at once,
// in transactions of 100k rows. Chunk c's rows are made with a generator
// seeded with (seed, c), so the data does not depend on the number of
// workers or on which worker made which chunk.
func copyParallel(ctx context.Context, db *sql.DB, table string, cols []string, n, workers int, seed uint64,
	row func(r *rand.Rand, i int) []any) error {
	const chunk = 100_000
	chunks := (n + chunk - 1) / chunk
	next := make(chan int)
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer close(next)
		for c := 0; c < chunks; c++ {
			select {
			case next <- c:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	var done = make(chan int, chunks)
	for w := 0; w < workers; w++ {
		g.Go(func() error {
			for c := range next {
				r := rand.New(rand.NewPCG(seed, uint64(c)))
				from := c * chunk
				if err := copyChunk(ctx, db, table, cols, from, min(from+chunk, n), func(i int) []any { return row(r, i) }); err != nil {
					return err
				}
				done <- min(from+chunk, n) - from
			}
			return nil
		})
	}
	g.Go(func() error {
		total := 0
		for c := 0; c < chunks; c++ {
			select {
			case k := <-done:
				total += k
				if total%1_000_000 < chunk || total == n {
					log.Printf("  %s: %d / %d rows", table, total, n)
				}
			case <-ctx.Done():
				return nil
			}
		}
		return nil
	})
	return g.Wait()
}

// copyChunk COPYs rows [from, to) made by row into table, in one
// transaction.
func copyChunk(ctx context.Context, db *sql.DB, table string, cols []string, from, to int, row func(i int) []any) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	stmt, err := tx.PrepareContext(ctx, pq.CopyIn(table, cols...))
	if err != nil {
		return err
	}
	for i := from; i < to; i++ {
		if _, err := stmt.ExecContext(ctx, row(i)...); err != nil {
			return err
		}
	}
	if _, err := stmt.ExecContext(ctx); err != nil {
		return err
	}
	if err := stmt.Close(); err != nil {
		return err
	}
	return tx.Commit()
}
