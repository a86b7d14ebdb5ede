package sweep

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/big"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/evmpay/evmpay/store"
)

// errRaced: another worker changed the invoice's transactions since this
// one read them; the pass leaves the invoice for the next one.
var errRaced = errors.New("sweep: invoice transactions changed by another worker")

// slot is the transactions that share one (sender, kind, nonce): an
// original and its replacements, oldest first. At most one is live
// (SIGNED, SENT or MINED); refresh finds the one mined, if any.
type slot struct {
	kind  string
	from  common.Address
	nonce uint64
	txs   []store.SweepTx

	mined      *store.SweepTx // mined at or below the pass's head
	receipt    *types.Receipt
	minedAbove bool // one of them was mined after the pass's head
}

func (sl *slot) live() *store.SweepTx {
	for i := len(sl.txs) - 1; i >= 0; i-- {
		switch sl.txs[i].Status {
		case store.SweepTxSigned, store.SweepTxSent, store.SweepTxMined:
			return &sl.txs[i]
		}
	}
	return nil
}

// groupSlots groups txs of one kind by (sender, nonce), in the order of
// their first transaction.
func groupSlots(txs []store.SweepTx, kind string) []*slot {
	type key struct {
		from  common.Address
		nonce uint64
	}
	var out []*slot
	byKey := map[key]*slot{}
	for _, t := range txs {
		if t.Kind != kind {
			continue
		}
		k := key{t.From, t.Nonce}
		sl := byKey[k]
		if sl == nil {
			sl = &slot{kind: kind, from: t.From, nonce: t.Nonce}
			byKey[k] = sl
			out = append(out, sl)
		}
		sl.txs = append(sl.txs, t)
	}
	return out
}

// nonceSlots groups the unmined transactions of kind (one sender's) into
// slots, each with every transaction of its nonce, replaced ones too
// (ListUnminedSweepTxs lists only SIGNED and SENT). The original of a
// replacement may be the one the chain mined: it was already on its way
// when the bumped one was signed, which the node then refuses as "nonce
// too low", and only the original's receipt says what used the nonce.
// With the replacement alone in the slot that looked like a nonce used by
// someone else: the slot was marked FAILED and the mined original never
// reached the ledger.
func (s *Sweeper) nonceSlots(ctx context.Context, unmined []store.SweepTx, kind string) ([]*slot, error) {
	slots := groupSlots(unmined, kind)
	for _, sl := range slots {
		all, err := s.st.ListSweepTxsByNonce(ctx, sl.from, kind, sl.nonce)
		if err != nil {
			return nil, err
		}
		sl.txs = all
	}
	return slots, nil
}

// refresh looks up the receipts of a slot's transactions (newest first) and
// records what it finds: which one is mined, or that a mined one was
// reorged out (back to SENT, to be re-broadcast).
func (s *Sweeper) refresh(ctx context.Context, p *pass, sl *slot) error {
	if err := s.findMined(ctx, p, sl, false); err != nil {
		return err
	}
	return s.syncSlot(ctx, p, sl)
}

// findMined sets sl.mined and sl.receipt to the transaction of the slot
// (newest first) the node has a receipt of at or below the pass's block,
// and sl.minedAbove when one is mined above it. FAILED transactions are
// asked about only withFailed (recheck.go).
func (s *Sweeper) findMined(ctx context.Context, p *pass, sl *slot, withFailed bool) error {
	sl.mined, sl.receipt, sl.minedAbove = nil, nil, false
	for i := len(sl.txs) - 1; i >= 0; i-- {
		t := &sl.txs[i]
		if t.Status == store.SweepTxFailed && !withFailed {
			continue
		}
		r, err := s.chain.TransactionReceipt(ctx, t.TxHash)
		if errors.Is(err, ethereum.NotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("receipt of %s: %w", t.TxHash.Hex(), err)
		}
		if r.BlockNumber == nil || r.BlockNumber.Uint64() > p.number {
			sl.minedAbove = true
			continue
		}
		sl.mined, sl.receipt = t, r
		return nil
	}
	return nil
}

func (s *Sweeper) syncSlot(ctx context.Context, p *pass, sl *slot) error {
	var changes []*store.SweepTx // demotions before the promotion (one live per nonce)
	wasMined := map[*store.SweepTx]bool{}
	for i := range sl.txs {
		wasMined[&sl.txs[i]] = sl.txs[i].Status == store.SweepTxMined
	}
	if sl.mined != nil {
		for i := range sl.txs {
			t := &sl.txs[i]
			if t != sl.mined && (t.Status == store.SweepTxSigned || t.Status == store.SweepTxSent || t.Status == store.SweepTxMined) {
				// (A MINED one was reorged out and another mined instead.)
				t.Status, t.BlockNumber, t.GasUsed, t.FeeWei, t.MinedAt = store.SweepTxReplaced, nil, nil, nil, nil
				changes = append(changes, t)
			}
		}
		m, r := sl.mined, sl.receipt
		block := r.BlockNumber.Uint64()
		if m.Status != store.SweepTxMined || m.BlockNumber == nil || *m.BlockNumber != block {
			gasUsed := r.GasUsed
			price := r.EffectiveGasPrice
			if price == nil {
				price = m.MaxFeeWei.Big() // an upper bound, for nodes that omit it
			}
			f := amountOf(gasCost(gasUsed, price))
			now := p.now
			m.Status, m.BlockNumber, m.GasUsed, m.FeeWei, m.MinedAt, m.LastError = store.SweepTxMined, &block, &gasUsed, &f, &now, ""
			if m.SentAt == nil {
				m.SentAt = &now
			}
			changes = append(changes, m)
			s.log.DebugContext(ctx, "sweep: mined", slog.String("kind", m.Kind), slog.String("tx_hash", m.TxHash.Hex()),
				slog.Uint64("block", block))
		}
	} else if !sl.minedAbove {
		for i := range sl.txs {
			t := &sl.txs[i]
			if t.Status != store.SweepTxMined {
				continue
			}
			if *t.BlockNumber > p.number {
				// The node's head is below the block that held it: the
				// node is behind (or another chain), not reorged. Wait.
				s.log.WarnContext(ctx, "sweep: the node's head is below a mined transaction's block; waiting for it",
					slog.String("kind", t.Kind), slog.String("tx_hash", t.TxHash.Hex()),
					slog.Uint64("block", *t.BlockNumber), slog.Uint64("head", p.number))
				continue
			}
			s.log.WarnContext(ctx, "sweep: transaction reorged out, re-broadcasting it", slog.String("kind", t.Kind),
				slog.String("tx_hash", t.TxHash.Hex()), slog.Uint64("was_block", *t.BlockNumber))
			s.m.reorged.WithLabelValues(t.Kind).Inc()
			// SentBlock unset: re-broadcast in this very pass, and restart
			// the replacement clock when the node takes it back.
			t.Status, t.BlockNumber, t.GasUsed, t.FeeWei, t.MinedAt, t.SentBlock = store.SweepTxSent, nil, nil, nil, nil, nil
			changes = append(changes, t)
		}
	}
	if len(changes) == 0 {
		return nil
	}
	// The ledger moves with the transactions: a mined one's movements are
	// appended, and one no longer mined (reorged out, or mined again in
	// another block) has its movements reversed, in the same database
	// transaction (ledger.go).
	var entries []store.LedgerEntry
	for _, t := range changes {
		if t.Status == store.SweepTxMined {
			es, err := s.ledgerOfMined(ctx, p, *t, sl.receipt)
			if err != nil {
				return err
			}
			entries = append(entries, es...)
		}
	}
	return s.st.InTx(ctx, func(tx store.Tx) error {
		for _, t := range changes {
			t.UpdatedAt = p.now
			if err := tx.UpdateSweepTx(ctx, *t); err != nil {
				return err
			}
			if wasMined[t] {
				if _, err := tx.ReverseLedgerEntries(ctx, t.ID, p.now); err != nil {
					return err
				}
			}
		}
		return tx.InsertLedgerEntries(ctx, entries)
	})
}

// broadcast sends a stored transaction's bytes again (never a new
// signature) and records the node's answer on t: SENT at this head when it
// is accepted, its refusal in LastError otherwise. The error is only for a
// transient failure or the database.
func (s *Sweeper) broadcast(ctx context.Context, p *pass, t *store.SweepTx) (class, error) {
	var tx types.Transaction
	if err := tx.UnmarshalBinary(t.RawTx); err != nil {
		return classRejected, fmt.Errorf("decode stored tx %s: %w", t.TxHash.Hex(), err)
	}
	if err := s.checkChain(ctx); err != nil {
		// Nothing sent: a transient failure, retried once the node serves
		// the right chain again.
		s.log.ErrorContext(ctx, "sweep: not broadcasting: the chain guard refused the node", slog.String("kind", t.Kind),
			slog.String("tx_hash", t.TxHash.Hex()), slog.String("error", err.Error()))
		return classTransient, err
	}
	sendErr := s.chain.SendTransaction(ctx, &tx)
	c := classify(sendErr)
	s.m.broadcasts.WithLabelValues(t.Kind, c.String()).Inc()
	if c == classTransient {
		return c, fmt.Errorf("broadcast %s: %w", t.TxHash.Hex(), sendErr)
	}
	before := *t
	switch {
	case c.accepted():
		if t.Status == store.SweepTxSigned || t.SentBlock == nil {
			now, number := p.now, p.number
			t.Status, t.SentBlock = store.SweepTxSent, &number
			if t.SentAt == nil {
				t.SentAt = &now
			}
		}
		t.LastError = ""
	case c == classRejected:
		t.LastError = rejectedReason(sendErr)
	default:
		t.LastError = c.String()
	}
	if !c.accepted() && t.LastError != before.LastError {
		s.log.WarnContext(ctx, "sweep: node refused transaction", slog.String("kind", t.Kind),
			slog.String("tx_hash", t.TxHash.Hex()), slog.Uint64("nonce", t.Nonce), slog.String("class", t.LastError))
	}
	if t.Status == before.Status && t.LastError == before.LastError && t.SentBlock == before.SentBlock {
		return c, nil
	}
	t.UpdatedAt = p.now
	if err := s.st.UpdateSweepTx(ctx, *t); err != nil {
		return c, err
	}
	return c, nil
}

// verdict is what tend found about a slot whose live transaction is not
// mined.
type verdict struct {
	// class is the node's answer if the transaction was (re)broadcast.
	class class
	// dead: the nonce was used by a transaction that is none of the slot's,
	// confirmed one block after it was first seen; the slot's transactions
	// are marked FAILED.
	dead bool
	// nonceWait: the nonce was used by a transaction that is none of the
	// slot's, seen for the first time: wait one block before giving up on
	// it (its receipt may lag).
	nonceWait bool
	// replace: the transaction is stuck or its fee was refused; the caller
	// replaces it with a bumped fee.
	replace bool
}

// tend keeps a slot's unmined live transaction moving: it re-broadcasts
// the stored bytes once per block (a transaction stored but never
// broadcast, or dropped by the node, is sent again), notices a nonce used
// by someone else, and says when to replace it.
func (s *Sweeper) tend(ctx context.Context, p *pass, sl *slot) (verdict, error) {
	live := sl.live()
	if live == nil || sl.mined != nil || sl.minedAbove {
		return verdict{}, nil
	}
	n, err := s.nonceAt(ctx, p, sl.from)
	if err != nil {
		return verdict{}, err
	}
	if n > live.Nonce {
		return s.nonceUsed(ctx, p, sl, live)
	}
	switch {
	case live.LastError == ReasonUnderpriced || live.LastError == ReasonReplacementUnderpriced:
		return verdict{class: classUnderpriced, replace: true}, nil
	case live.Status == store.SweepTxSent && live.SentBlock != nil && p.number >= *live.SentBlock &&
		p.number-*live.SentBlock >= s.cfg.ReplaceAfterBlocks:
		return verdict{replace: true}, nil
	case live.Status == store.SweepTxSigned || live.SentBlock == nil || p.number > *live.SentBlock:
		c, err := s.broadcast(ctx, p, live)
		if err != nil {
			return verdict{class: c}, err
		}
		return verdict{class: c, replace: c == classUnderpriced || c == classReplacementUnderpriced}, nil
	}
	return verdict{}, nil
}

// nonceUsed handles a slot whose nonce the chain has used while none of
// the slot's transactions has a receipt: first seen, it waits a block
// (the receipt may lag); after that the slot is dead unless the indexed
// chain says otherwise (indexedSend).
func (s *Sweeper) nonceUsed(ctx context.Context, p *pass, sl *slot, live *store.SweepTx) (verdict, error) {
	if live.LastError != ReasonNonceTooLow || live.SentBlock == nil || p.number <= *live.SentBlock {
		number := p.number
		live.LastError, live.SentBlock, live.UpdatedAt = ReasonNonceTooLow, &number, p.now
		return verdict{class: classNonceTooLow, nonceWait: true}, s.st.UpdateSweepTx(ctx, *live)
	}
	if wait, err := s.indexedSend(ctx, sl, *live.SentBlock); err != nil || wait {
		return verdict{class: classNonceTooLow, nonceWait: true}, err
	}
	s.log.WarnContext(ctx, "sweep: nonce used by another transaction", slog.String("kind", sl.kind),
		slog.String("from", sl.from.Hex()), slog.Uint64("nonce", sl.nonce))
	err := s.st.InTx(ctx, func(tx store.Tx) error {
		for i := range sl.txs {
			t := &sl.txs[i]
			if t.Status == store.SweepTxFailed || t.Status == store.SweepTxReplaced && t != live {
				continue
			}
			t.Status, t.LastError, t.UpdatedAt = store.SweepTxFailed, ReasonNonceTooLow, p.now
			if err := tx.UpdateSweepTx(ctx, *t); err != nil {
				return err
			}
		}
		return nil
	})
	return verdict{class: classNonceTooLow, dead: true}, err
}

// indexedSend tells whether a slot whose nonce the node reported used at
// block seen must wait rather than die, by the indexed chain: a node's
// receipts can lag its state by more than a block (geth answers none
// while it is still indexing transactions, and behind a proxy the
// receipt may come from another node), and a dead slot is final — a
// refund or payout marked FAILED frees its amount to be sent again. It
// waits while the index has not reached seen (the transaction that took
// the nonce is at or below it), and while one of the slot's own
// transactions is indexed (it took the nonce; its receipt will follow).
// Without an index (no block indexed yet) the node's word stands.
func (s *Sweeper) indexedSend(ctx context.Context, sl *slot, seen uint64) (bool, error) {
	head, err := s.st.LatestBlock(ctx)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read the indexed head: %w", err)
	}
	if head.Number < seen {
		s.log.DebugContext(ctx, "sweep: nonce used; waiting for the index to reach the block to tell by whom",
			slog.String("kind", sl.kind), slog.String("from", sl.from.Hex()), slog.Uint64("nonce", sl.nonce),
			slog.Uint64("block", seen), slog.Uint64("indexed_head", head.Number))
		return true, nil
	}
	for _, t := range sl.txs {
		_, err := s.st.GetTx(ctx, t.TxHash)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("look up %s in the index: %w", t.TxHash.Hex(), err)
		}
		// Once per transaction and process: a node still indexing its
		// transactions may withhold receipts for hours.
		if _, logged := s.alerted.LoadOrStore("no-receipt/"+t.TxHash.Hex(), true); !logged {
			s.log.WarnContext(ctx, "sweep: the node has no receipt for a transaction the index holds; waiting for it",
				slog.String("kind", sl.kind), slog.String("tx_hash", t.TxHash.Hex()), slog.Uint64("nonce", sl.nonce))
		}
		return true, nil
	}
	return false, nil
}

// spec describes a transaction to sign and store.
type spec struct {
	kind      string
	invoiceID *int64
	// outboundID is the refund or payout the transaction belongs to.
	outboundID *int64
	from, to   common.Address
	value      *big.Int
	fee        fee
	// data is the call data (a token call); nil for a plain transfer.
	data []byte
	// gas is the gas limit; 0 means transferGas.
	gas uint64
	// nonce is used as is unless reserve is set: then the nonce comes from
	// ReserveNonce(from, nonce) inside the storing transaction, nonce being
	// the node's pending nonce.
	nonce   uint64
	reserve bool
	sign    signFunc
	// replaces is marked REPLACED in the storing transaction.
	replaces *store.SweepTx
	// invoice, when set, is locked and checked: its transactions must still
	// be the ones the decision was based on (count and largest id).
	invoice *invoiceGuard
}

// An outbound's transactions carry its check too (outbound): with id 0
// (a payout wallet's send) no invoice is locked, and status "" leaves the
// invoice's sweep status as it is (a refund sent from the deposit).
type invoiceGuard struct {
	id     int64
	seen   fingerprint
	status string // the invoice's new sweep status
	// wrongToken is the token paid to the invoice as a wrong asset whose
	// sweep the transaction belongs to (stored as its WrongToken); nil for
	// the invoice's own sweep.
	wrongToken *common.Address
	// outbound, when set, is the check of an outbound's transaction: its
	// row is locked and its state checked and written in the same
	// database transaction (outbound.go).
	outbound *outboundGuard
}

type fingerprint struct {
	count int
	maxID int64
}

func fingerprintOf(txs []store.SweepTx) fingerprint {
	f := fingerprint{count: len(txs)}
	for _, t := range txs {
		f.maxID = max(f.maxID, t.ID)
	}
	return f
}

// signAndStore signs a transaction and stores it (status SIGNED) in one
// database transaction, before anything is broadcast: after a crash the
// stored bytes are re-broadcast, never a second signature for the same
// step.
func (s *Sweeper) signAndStore(ctx context.Context, p *pass, sp spec) (store.SweepTx, error) {
	var rec store.SweepTx
	err := s.inTx(ctx, func(tx store.Tx) error {
		var inv store.Invoice
		if g := sp.invoice; g != nil && g.id != 0 {
			var err error
			if inv, err = tx.GetInvoiceForUpdate(ctx, g.id); err != nil {
				return err
			}
			txs, err := tx.ListSweepTxsByInvoice(ctx, g.id)
			if err != nil {
				return err
			}
			if fingerprintOf(txs) != g.seen {
				return errRaced
			}
			if sp.outboundID == nil {
				// A refund that leaves from the deposit address holds it
				// until it is done (outbound.go).
				if err := s.depositHeld(ctx, tx, g.id); err != nil {
					return err
				}
			}
		}
		if g := sp.invoice; g != nil && g.outbound != nil {
			if err := g.outbound.check(ctx, tx); err != nil {
				return err
			}
		}
		nonce := sp.nonce
		if sp.reserve {
			var err error
			if nonce, err = tx.ReserveNonce(ctx, sp.from, sp.nonce); err != nil {
				return err
			}
		}
		to, gas := sp.to, cmp.Or(sp.gas, transferGas)
		unsigned := types.NewTx(&types.DynamicFeeTx{
			ChainID:   s.chainID,
			Nonce:     nonce,
			GasTipCap: sp.fee.tip,
			GasFeeCap: sp.fee.cap,
			Gas:       gas,
			To:        &to,
			Value:     sp.value,
			Data:      sp.data,
		})
		signed, err := sp.sign(ctx, unsigned)
		if err != nil {
			return fmt.Errorf("sign %s: %w", sp.kind, err)
		}
		if from, err := types.Sender(s.signer, signed); err != nil || from != sp.from {
			return fmt.Errorf("sign %s: the signer signed for another account", sp.kind)
		}
		raw, err := signed.MarshalBinary()
		if err != nil {
			return err
		}
		if r := sp.replaces; r != nil {
			r.Status, r.UpdatedAt = store.SweepTxReplaced, p.now
			if err := tx.UpdateSweepTx(ctx, *r); err != nil {
				return err
			}
		}
		rec = store.SweepTx{
			InvoiceID: sp.invoiceID, Kind: sp.kind, From: sp.from, To: sp.to, Nonce: nonce,
			ValueWei: amountOf(sp.value), GasLimit: gas,
			MaxFeeWei: amountOf(sp.fee.cap), MaxPriorityFeeWei: amountOf(sp.fee.tip),
			TxHash: signed.Hash(), RawTx: raw, Status: store.SweepTxSigned,
			CreatedAt: p.now, UpdatedAt: p.now, OutboundID: sp.outboundID,
		}
		if sp.invoice != nil {
			rec.WrongToken = sp.invoice.wrongToken
		}
		if err := tx.CreateSweepTx(ctx, &rec); err != nil {
			return err
		}
		if g := sp.invoice; g != nil && g.outbound != nil {
			if err := g.outbound.record(ctx, tx, rec, p.now); err != nil {
				return err
			}
		}
		if g := sp.invoice; g != nil && g.id != 0 && g.status != "" {
			inv.SweepStatus, inv.UpdatedAt = g.status, p.now
			if (sp.kind == store.SweepTxSweep || sp.kind == store.SweepTxPull) && g.wrongToken == nil {
				h := rec.TxHash
				inv.SweepTxHash = &h
			}
			return tx.UpdateInvoice(ctx, &inv)
		}
		return nil
	})
	if err == nil {
		s.m.signed.WithLabelValues(sp.kind).Inc()
		s.log.InfoContext(ctx, "sweep: signed", slog.String("kind", sp.kind), slog.String("tx_hash", rec.TxHash.Hex()),
			slog.String("from", rec.From.Hex()), slog.Uint64("nonce", rec.Nonce), slog.String("value_wei", rec.ValueWei.String()),
			slog.String("max_fee_wei", rec.MaxFeeWei.String()))
	}
	return rec, err
}
