-- Token sweeps by EIP-2612 permit: the sweep wallet sends PERMIT and PULL
-- (transferFrom) transactions for an invoice. Their sender is the sweep
-- wallet, shared by every invoice, so "never swept twice" is kept per
-- invoice: at most one live PULL for one invoice.

CREATE UNIQUE INDEX sweep_txs_live_pull ON sweep_txs (invoice_id)
    WHERE kind = 'PULL' AND status IN ('SIGNED', 'SENT', 'MINED');
