-- One live sweep per deposit address and asset, instead of one per deposit
-- address: after the invoice's own sweep (nonce 0) the deposit may send a
-- wrong-asset token's transfer (its next nonce) — each still at most once.
-- The invoice's own sweep has wrong_token NULL (the empty value here).
CREATE UNIQUE INDEX IF NOT EXISTS sweep_txs_live_sweep_asset
    ON sweep_txs (from_address, COALESCE(wrong_token, x''))
    WHERE kind = 'SWEEP' AND status IN ('SIGNED', 'SENT', 'MINED');
DROP INDEX IF EXISTS sweep_txs_live_sweep;
