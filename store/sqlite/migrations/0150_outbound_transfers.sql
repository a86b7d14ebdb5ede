-- Money out (issue #32): one transfer on chain settles at most one
-- outbound, whoever pays it, and a transfer sent by any wallet of the
-- service settles no merchant-paid request (docs/refunds.md).
ALTER TABLE outbounds ADD COLUMN submitted_tx_hash BLOB CHECK (submitted_tx_hash IS NULL OR length(submitted_tx_hash) = 32);

-- A database where a merchant-paid request was already settled by the
-- service's own transfer is not repaired silently: the migration stops
-- (docs/refunds.md, "Repairing an outbound settled by the service's
-- transfer"). SQLite raises only in triggers: a CHECK says it.
CREATE TEMP TABLE migration_0150 (merchant_paid_outbounds_settled_by_the_service INTEGER
    CHECK (merchant_paid_outbounds_settled_by_the_service = 0));
INSERT INTO migration_0150 SELECT count(*) FROM outbounds o
    WHERE o.paid_by = 'MERCHANT' AND o.tx_hash IS NOT NULL AND (
        EXISTS (SELECT 1 FROM sweep_txs t WHERE t.tx_hash = o.tx_hash)
        OR EXISTS (SELECT 1 FROM service_wallets w WHERE w.address = o.from_address)
        OR EXISTS (SELECT 1 FROM invoices i WHERE i.deposit_address = o.from_address));
DROP TABLE migration_0150;

DROP INDEX IF EXISTS outbounds_matched;
CREATE UNIQUE INDEX outbounds_transfer ON outbounds (tx_hash, COALESCE(log_index, -1)) WHERE tx_hash IS NOT NULL;

CREATE TRIGGER outbounds_merchant_paid_not_service_insert BEFORE INSERT ON outbounds
    WHEN NEW.paid_by = 'MERCHANT' AND NEW.tx_hash IS NOT NULL AND (
        EXISTS (SELECT 1 FROM sweep_txs WHERE tx_hash = NEW.tx_hash)
        OR EXISTS (SELECT 1 FROM service_wallets WHERE address = NEW.from_address)
        OR EXISTS (SELECT 1 FROM invoices WHERE deposit_address = NEW.from_address)
        OR EXISTS (SELECT 1 FROM invoices_archive WHERE deposit_address = NEW.from_address))
BEGIN
    SELECT RAISE(ABORT, 'a transfer sent by a wallet of the service settles no merchant-paid request');
END;
CREATE TRIGGER outbounds_merchant_paid_not_service_update BEFORE UPDATE OF tx_hash, from_address ON outbounds
    WHEN NEW.paid_by = 'MERCHANT' AND NEW.tx_hash IS NOT NULL AND (
        EXISTS (SELECT 1 FROM sweep_txs WHERE tx_hash = NEW.tx_hash)
        OR EXISTS (SELECT 1 FROM service_wallets WHERE address = NEW.from_address)
        OR EXISTS (SELECT 1 FROM invoices WHERE deposit_address = NEW.from_address)
        OR EXISTS (SELECT 1 FROM invoices_archive WHERE deposit_address = NEW.from_address))
BEGIN
    SELECT RAISE(ABORT, 'a transfer sent by a wallet of the service settles no merchant-paid request');
END;
