-- Money out (issue #32): one transfer on chain settles at most one
-- outbound, whoever pays it, and a transfer sent by any wallet of the
-- service settles no merchant-paid request (docs/refunds.md, "Which
-- transfer pays a merchant-paid request").

-- The transaction a merchant names as the payment of its merchant-paid
-- request (POST /v1/refunds/{id}/payment): checked by the engine once
-- indexed.
ALTER TABLE outbounds ADD COLUMN submitted_tx_hash BYTEA CHECK (submitted_tx_hash IS NULL OR length(submitted_tx_hash) = 32);

-- A database where a merchant-paid request was already settled by the
-- service's own transfer (the defect this migration closes) is not
-- repaired silently: the migration stops and names the outbounds
-- (docs/refunds.md, "Repairing an outbound settled by the service's
-- transfer").
DO $$
DECLARE ids TEXT;
BEGIN
    SELECT string_agg(o.id::text, ', ' ORDER BY o.id) INTO ids FROM outbounds o
    WHERE o.paid_by = 'MERCHANT' AND o.tx_hash IS NOT NULL AND (
        EXISTS (SELECT 1 FROM sweep_txs t WHERE t.tx_hash = o.tx_hash)
        OR EXISTS (SELECT 1 FROM service_wallets w WHERE w.address = o.from_address)
        OR EXISTS (SELECT 1 FROM invoices i WHERE i.deposit_address = o.from_address));
    IF ids IS NOT NULL THEN
        RAISE EXCEPTION 'migration 0150: merchant-paid outbounds % were settled by a transfer of the service; repair them first (docs/refunds.md, "Repairing an outbound settled by the service''s transfer")', ids;
    END IF;
END $$;

-- Every outbound, not only merchant-paid ones: a service-paid outbound's
-- transaction (and, once mined, its token Transfer log) is its own.
DROP INDEX IF EXISTS outbounds_matched;
CREATE UNIQUE INDEX outbounds_transfer ON outbounds (tx_hash, COALESCE(log_index, -1)) WHERE tx_hash IS NOT NULL;

-- A merchant-paid request is paid by the merchant: never by a transaction
-- the service signed (sweep_txs), nor by a transfer from an address the
-- service holds the key of (a deposit address, the sweep wallet, the gas
-- funder, a payout wallet).
CREATE FUNCTION outbounds_merchant_paid_not_service() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.paid_by = 'MERCHANT' AND NEW.tx_hash IS NOT NULL AND (
        EXISTS (SELECT 1 FROM sweep_txs WHERE tx_hash = NEW.tx_hash)
        OR EXISTS (SELECT 1 FROM service_wallets WHERE address = NEW.from_address)
        OR EXISTS (SELECT 1 FROM invoices WHERE deposit_address = NEW.from_address)
        OR EXISTS (SELECT 1 FROM invoices_archive WHERE deposit_address = NEW.from_address)) THEN
        RAISE EXCEPTION 'outbound %: a transfer sent by a wallet of the service settles no merchant-paid request', NEW.id
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER outbounds_merchant_paid_not_service BEFORE INSERT OR UPDATE OF tx_hash, from_address ON outbounds
    FOR EACH ROW EXECUTE FUNCTION outbounds_merchant_paid_not_service();
