package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/settlement"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres"
)

// oneEth is what each fresh invoice asks and each paying transaction sends.
const oneEth = 1_000_000_000_000_000_000

// runSettle measures settlement per block on the generated database, as
// settlement's BenchmarkBlock does on a small one: it appends blocks of
// perBlock transactions after the generated chain, paying of them to fresh
// PENDING invoices, and times the real Settler's Sync for each (read the
// head and cursor, settle the block in one transaction, the confirmation
// pass — after 12 blocks, paying invoices confirm per block too — and the
// expiry pass). Writing the block is not timed: the indexer does it.
func runSettle(ctx context.Context, dbURL string, blocks, perBlock, paying int) error {
	st, err := openStore(ctx, dbURL)
	if err != nil {
		return err
	}
	defer st.Close()
	sz, err := sizesIn(ctx, st)
	if err != nil {
		return err
	}
	if err := paymentsForPaid(ctx, st); err != nil {
		return err
	}
	first, err := freshPending(ctx, st, sz, blocks*paying)
	if err != nil {
		return err
	}
	head, err := chainHead(ctx, st)
	if err != nil {
		return err
	}
	s, err := settlement.New(st, settlement.Config{})
	if err != nil {
		return err
	}

	// Warm-up, not measured: the first block after the generated chain, and
	// the first passes over the generated data (the PAID invoices of the
	// last day confirm, the PENDING ones of the last hour expire).
	if head, err = appendBlock(ctx, st, head, nil); err != nil {
		return err
	}
	t := time.Now()
	if err := s.Sync(ctx); err != nil {
		return err
	}
	log.Printf("settle: warm-up (first block and the passes over the generated invoices) %s", time.Since(t).Round(time.Millisecond))
	// Settlement's deposit filter loads a page of addresses a block; the
	// measured blocks are the steady state, with it loaded.
	t = time.Now()
	loaded := 0
	for ; !filterInUse(s) && loaded < 1000; loaded++ {
		if head, err = appendBlock(ctx, st, head, nil); err != nil {
			return err
		}
		if err := s.Sync(ctx); err != nil {
			return err
		}
	}
	log.Printf("settle: deposit filter loaded in %d empty blocks, %s (in use: %t)", loaded, time.Since(t).Round(time.Millisecond), filterInUse(s))

	next := first // the next fresh invoice to pay
	each := make([]time.Duration, 0, blocks)
	for i := 0; i < blocks; i++ {
		txs := make([]store.Transaction, perBlock)
		for j := range txs {
			to := common.BytesToAddress(randomBytes(20))
			value := store.NewAmount(1_000_000_000)
			if j%(perBlock/paying) == 0 && j/(perBlock/paying) < paying {
				to, value = common.BytesToAddress(depositAddress(next)), store.NewAmount(oneEth)
				next++
			}
			txs[j] = store.Transaction{Hash: common.BytesToHash(randomBytes(32)), From: common.BytesToAddress(randomBytes(20)),
				To: &to, ValueWei: value, Gas: 21000, Type: 2, Input: []byte{}}
		}
		if head, err = appendBlock(ctx, st, head, txs); err != nil {
			return err
		}
		t := time.Now()
		if err := s.Sync(ctx); err != nil {
			return err
		}
		each = append(each, time.Since(t))
	}

	// Every payment was matched, and the invoices deep enough confirmed.
	var paid, confirmed int
	if err := st.DB().QueryRowContext(ctx, `SELECT COUNT(*), COUNT(*) FILTER (WHERE status = 'CONFIRMED')
		FROM invoices WHERE id >= $1 AND id < $2 AND status IN ('PAID', 'CONFIRMED')`, first, next).Scan(&paid, &confirmed); err != nil {
		return err
	}
	if paid != next-first {
		return fmt.Errorf("settle: %d of %d paid invoices are PAID or CONFIRMED", paid, next-first)
	}
	var total time.Duration
	for _, d := range each {
		total += d
	}
	p50, p99 := percentiles(each)
	fmt.Printf("settlement: %d blocks of %d transactions, %d paying pending invoices each; %d invoices paid, %d of them confirmed\n",
		blocks, perBlock, paying, paid, confirmed)
	fmt.Printf("per block: mean %s, p50 %s, p99 %s, max %s\n", ms(total/time.Duration(len(each))), ms(p50), ms(p99), ms(each[len(each)-1]))
	return nil
}

// paymentsForPaid gives each generated PAID invoice its payment: the
// generator writes paid invoices without payment rows, which the
// confirmation pass would list (and skip) forever. The payment is in block
// 1, long confirmed.
func paymentsForPaid(ctx context.Context, st *postgres.Store) error {
	res, err := st.DB().ExecContext(ctx, `INSERT INTO payments (invoice_id, chain_id, tx_hash, log_index, block_number,
			block_hash, from_address, amount_wei, created_at)
		SELECT i.id, i.chain_id, sha256('scalegen payment'::bytea || int8send(i.id)), -1, 1, sha256('block 1'::bytea),
			substring(sha256('payer'::bytea || int8send(i.id)) for 20), i.paid_wei, i.paid_at
		FROM invoices i WHERE i.status = 'PAID' AND NOT EXISTS (SELECT 1 FROM payments p WHERE p.invoice_id = i.id)`)
	if err != nil {
		return err
	}
	n, _ := res.RowsAffected()
	log.Printf("settle: %d generated PAID invoices given their payment", n)
	return nil
}

// filterInUse reads the settler's evmpay_settlement_deposit_filter_in_use.
func filterInUse(s *settlement.Settler) bool {
	mfs, err := s.Gatherer().Gather()
	if err != nil {
		return false
	}
	for _, mf := range mfs {
		if mf.GetName() == "settlement_deposit_filter_in_use" {
			return len(mf.GetMetric()) == 1 && mf.GetMetric()[0].GetGauge().GetValue() == 1
		}
	}
	return false
}

// freshPending creates n PENDING invoices of one ether, expiring in two
// hours, after the generated ones; it returns the first one's id.
func freshPending(ctx context.Context, st *postgres.Store, sz sizes, n int) (int, error) {
	db := st.DB().DB
	var first int
	// Past the sequence and past every row (an interrupted run may have
	// written invoices without moving the sequence).
	if err := db.QueryRowContext(ctx, `SELECT GREATEST(nextval('invoices_id_seq'), (SELECT MAX(id) + 1 FROM invoices))`).Scan(&first); err != nil {
		return 0, err
	}
	now := time.Now().UTC()
	err := copyRows(ctx, db, "invoices", []string{"id", "merchant_id", "status", "amount_wei", "chain_id",
		"deposit_address", "derivation_index", "payment_uri", "lookup_token_hash", "expires_at", "created_at",
		"updated_at"}, n, func(i int) []any {
		id := first + i
		return []any{id, merchantOfInvoice(id, sz), "PENDING", fmt.Sprint(oneEth), chainID, depositAddress(id), id,
			fmt.Sprintf("ethereum:0x%x@%d?value=%d", depositAddress(id), chainID, uint64(oneEth)),
			invoice.LookupTokenHash(lookupToken(id)), now.Add(2 * time.Hour), now, now}
	})
	if err != nil {
		return 0, err
	}
	if _, err := db.ExecContext(ctx, `SELECT setval('invoices_id_seq', $1)`, first+n-1); err != nil {
		return 0, err
	}
	_, err = db.ExecContext(ctx, `UPDATE counters SET value = GREATEST(value, $1) WHERE name = 'derivation_index'`, first+n)
	return first, err
}

// chainHead is the last block: the indexed head, or the generated chain's
// last block (the generator writes transactions without their blocks).
func chainHead(ctx context.Context, st *postgres.Store) (store.Block, error) {
	b, err := st.LatestBlock(ctx)
	if err == nil {
		return b, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return b, err
	}
	var n uint64
	if err := st.DB().QueryRowContext(ctx, `SELECT COALESCE(MAX(block_number), 0) FROM transactions`).Scan(&n); err != nil {
		return b, err
	}
	return store.Block{Number: n, Hash: common.BytesToHash(hash("block", int(n)))}, nil
}

// appendBlock writes a block holding txs on top of head, as the indexer
// does, and returns it.
func appendBlock(ctx context.Context, st *postgres.Store, head store.Block, txs []store.Transaction) (store.Block, error) {
	now := time.Now().UTC()
	b := store.Block{Number: head.Number + 1, Hash: common.BytesToHash(randomBytes(32)), ParentHash: head.Hash,
		Timestamp: uint64(now.Unix()), Miner: common.BytesToAddress(randomBytes(20)), GasLimit: 30_000_000,
		GasUsed: uint64(21000 * len(txs)), TxCount: len(txs), IndexedAt: now}
	for i := range txs {
		txs[i].BlockNumber, txs[i].BlockHash, txs[i].Index, txs[i].Nonce = b.Number, b.Hash, i, uint64(i)
	}
	return b, st.InsertBlocks(ctx, []store.Block{b}, txs)
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}
