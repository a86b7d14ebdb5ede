-- What the sweep and the refund engine write carries its chain (issue
-- #36), as the index does since 0190: sweep transactions, the wallets'
-- nonces (one sequence per wallet per chain), refunds and payouts, and the
-- ledger's entries. Existing rows belong to the chain the database
-- recorded (the migrator fills in the default chain below, as for 0190).
-- The columns keep their default on SQLite (dropping one is a rebuild);
-- every writer goes through the store, which names the chain.

ALTER TABLE sweep_txs ADD COLUMN chain_id BIGINT NOT NULL DEFAULT {{DEFAULT_CHAIN_ID}};
ALTER TABLE outbounds ADD COLUMN chain_id BIGINT NOT NULL DEFAULT {{DEFAULT_CHAIN_ID}};
ALTER TABLE ledger_entries ADD COLUMN chain_id BIGINT NOT NULL DEFAULT {{DEFAULT_CHAIN_ID}};

-- A wallet's live nonce and a deposit address's live sweep are unique per
-- chain (the same address sends on every chain).
CREATE UNIQUE INDEX sweep_txs_chain_live_nonce ON sweep_txs (chain_id, from_address, kind, nonce)
    WHERE status IN ('SIGNED', 'SENT', 'MINED');
DROP INDEX sweep_txs_live_nonce;
CREATE UNIQUE INDEX sweep_txs_chain_live_sweep_asset
    ON sweep_txs (chain_id, from_address, COALESCE(wrong_token, x''))
    WHERE kind = 'SWEEP' AND status IN ('SIGNED', 'SENT', 'MINED');
DROP INDEX sweep_txs_live_sweep_asset;

CREATE TABLE wallet_nonces_0191 (
    chain_id   BIGINT NOT NULL,
    address    BLOB   NOT NULL,
    next_nonce BIGINT NOT NULL,
    PRIMARY KEY (chain_id, address)
);
INSERT INTO wallet_nonces_0191 (chain_id, address, next_nonce) SELECT {{DEFAULT_CHAIN_ID}}, address, next_nonce FROM wallet_nonces;
DROP TABLE wallet_nonces;
ALTER TABLE wallet_nonces_0191 RENAME TO wallet_nonces;

-- A payment's ledger entry is on its invoice's chain; a reversal on the
-- entry's.
DROP TRIGGER ledger_payment_credited;
CREATE TRIGGER ledger_payment_credited AFTER INSERT ON payments
BEGIN
    INSERT INTO ledger_entries (chain_id, kind, merchant_id, invoice_id, payment_id, token_address, from_address,
        to_address, amount, tx_hash, log_index, block_number, at, recorded_at)
    SELECT i.chain_id, 'payment', i.merchant_id, NEW.invoice_id, NEW.id, NEW.token_address, NEW.from_address,
        i.deposit_address, NEW.amount_wei, NEW.tx_hash, NULLIF(NEW.log_index, -1), NEW.block_number,
        COALESCE((SELECT b.timestamp * 1000000 FROM blocks b WHERE b.chain_id = i.chain_id AND b.number = NEW.block_number),
            NEW.created_at),
        NEW.created_at
    FROM invoices i WHERE i.id = NEW.invoice_id;
END;

DROP TRIGGER ledger_payment_reversed;
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
