-- evmpay:no-transaction
-- One live sweep per deposit address and asset, instead of one per deposit
-- address: after the invoice's own sweep (nonce 0) the deposit may send a
-- wrong-asset token's transfer (its next nonce) — each still at most once.
-- The invoice's own sweep has wrong_token NULL (the empty value here).
--
-- Built CONCURRENTLY (docs/scale.md, migrations on big tables) before the
-- old index is dropped, so that the rule holds at every moment; safe to run
-- again from the top.
DROP INDEX CONCURRENTLY IF EXISTS sweep_txs_live_sweep_asset;
CREATE UNIQUE INDEX CONCURRENTLY sweep_txs_live_sweep_asset
    ON sweep_txs (from_address, (COALESCE(wrong_token, '\x'::bytea)))
    WHERE kind = 'SWEEP' AND status IN ('SIGNED', 'SENT', 'MINED');
DROP INDEX CONCURRENTLY IF EXISTS sweep_txs_live_sweep;
