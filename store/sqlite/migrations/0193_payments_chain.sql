-- A payment carries the chain it arrived on (issue #36, wrong-network
-- payments): a deposit address is the same on every chain, so money sent
-- to it on another chain than its invoice's is recorded there, as a
-- wrong-network payment (wrong_network), never counted toward the
-- invoice. The same transaction hash and log index on two chains are two
-- payments. Existing rows arrived on their invoice's chain (read from the
-- invoice, an archived invoice, else the payment's ledger entry). SQLite
-- cannot change a unique constraint in place: the table is rebuilt in
-- this one transaction, keeping its ids and its AUTOINCREMENT sequence (a
-- ledger entry names its payment by id: an id is never reused). Its ledger
-- triggers go with the old table and are recreated on the new one.

CREATE TABLE payments_0193 (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    invoice_id    BIGINT        NOT NULL,
    tx_hash       BLOB          NOT NULL,
    log_index     INTEGER       NOT NULL,
    block_number  BIGINT        NOT NULL,
    block_hash    BLOB          NOT NULL,
    from_address  BLOB          NOT NULL,
    amount_wei    TEXT          NOT NULL,
    late          INTEGER       NOT NULL DEFAULT 0,
    created_at    TIMESTAMP     NOT NULL,
    token_address BLOB CHECK (token_address IS NULL OR length(token_address) = 20),
    wrong_asset   BOOLEAN       NOT NULL DEFAULT 0,
    chain_id      BIGINT        NOT NULL,
    wrong_network BOOLEAN       NOT NULL DEFAULT 0,
    UNIQUE (tx_hash, log_index, chain_id)
);
INSERT INTO payments_0193 (id, invoice_id, tx_hash, log_index, block_number, block_hash, from_address, amount_wei,
        late, created_at, token_address, wrong_asset, chain_id, wrong_network)
    SELECT p.id, p.invoice_id, p.tx_hash, p.log_index, p.block_number, p.block_hash, p.from_address, p.amount_wei,
        p.late, p.created_at, p.token_address, p.wrong_asset,
        COALESCE((SELECT i.chain_id FROM invoices i WHERE i.id = p.invoice_id),
            (SELECT a.chain_id FROM invoices_archive a WHERE a.id = p.invoice_id),
            (SELECT e.chain_id FROM ledger_entries e WHERE e.payment_id = p.id AND e.reverses IS NULL ORDER BY e.id LIMIT 1)),
        0
    FROM payments p;
DELETE FROM sqlite_sequence WHERE name = 'payments_0193';
INSERT INTO sqlite_sequence (name, seq)
    SELECT 'payments_0193', MAX(COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'payments'), 0),
        COALESCE((SELECT MAX(id) FROM payments), 0));
DROP TABLE payments;
ALTER TABLE payments_0193 RENAME TO payments;
CREATE INDEX payments_invoice_block ON payments (invoice_id, block_number);
CREATE INDEX payments_chain_block ON payments (chain_id, block_number);

-- A payment's ledger entry is on the chain it arrived on, dated by that
-- chain's block: a wrong-network deposit is money at the deposit address
-- on that chain, which that chain's reconciliation sees. A reversal is on
-- the entry's chain.
CREATE TRIGGER ledger_payment_credited AFTER INSERT ON payments
BEGIN
    INSERT INTO ledger_entries (chain_id, kind, merchant_id, invoice_id, payment_id, token_address, from_address,
        to_address, amount, tx_hash, log_index, block_number, at, recorded_at)
    SELECT NEW.chain_id, 'payment', i.merchant_id, NEW.invoice_id, NEW.id, NEW.token_address, NEW.from_address,
        i.deposit_address, NEW.amount_wei, NEW.tx_hash, NULLIF(NEW.log_index, -1), NEW.block_number,
        COALESCE((SELECT b.timestamp * 1000000 FROM blocks b WHERE b.chain_id = NEW.chain_id AND b.number = NEW.block_number),
            NEW.created_at),
        NEW.created_at
    FROM invoices i WHERE i.id = NEW.invoice_id;
END;

CREATE TRIGGER ledger_payment_reversed AFTER DELETE ON payments
BEGIN
    INSERT INTO ledger_entries (chain_id, kind, merchant_id, invoice_id, outbound_id, payment_id, sweep_tx_id, token_address,
        from_address, to_address, amount, tx_hash, log_index, block_number, at, fiat_currency, fiat_minor,
        reverses, recorded_at)
    SELECT e.chain_id, e.kind, e.merchant_id, e.invoice_id, e.outbound_id, e.payment_id, e.sweep_tx_id, e.token_address,
        e.to_address, e.from_address, e.amount, e.tx_hash, e.log_index, e.block_number,
        CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER),
        e.fiat_currency, e.fiat_minor, e.id,
        CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)
    FROM ledger_entries e
    WHERE e.payment_id = OLD.id AND e.reverses IS NULL
      AND NOT EXISTS (SELECT 1 FROM ledger_entries r WHERE r.reverses = e.id);
END;
