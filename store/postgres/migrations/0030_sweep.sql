-- Sweep: the block at which a sweep transaction was (last) broadcast, so a
-- transaction not mined within a few blocks can be replaced; the node's last
-- answer to it; at most one live transaction per (sender, kind, nonce) and
-- at most one live sweep per deposit address (a deposit address is never
-- swept twice); and an index for the operator's list of failed sweeps.

ALTER TABLE sweep_txs ADD COLUMN sent_block BIGINT;
ALTER TABLE sweep_txs ADD COLUMN last_error TEXT NOT NULL DEFAULT '';

CREATE UNIQUE INDEX sweep_txs_live_nonce ON sweep_txs (from_address, kind, nonce)
    WHERE status IN ('SIGNED', 'SENT', 'MINED');
CREATE UNIQUE INDEX sweep_txs_live_sweep ON sweep_txs (from_address)
    WHERE kind = 'SWEEP' AND status IN ('SIGNED', 'SENT', 'MINED');
CREATE INDEX sweep_txs_unmined ON sweep_txs (from_address, nonce)
    WHERE status IN ('SIGNED', 'SENT');

CREATE INDEX invoices_sweep_failed ON invoices (id) WHERE sweep_status = 'FAILED';
