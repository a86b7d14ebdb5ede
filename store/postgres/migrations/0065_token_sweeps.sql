-- Token sweeps by EIP-2612 permit: the sweep wallet sends PERMIT and PULL
-- (transferFrom) transactions for an invoice. Their sender is the sweep
-- wallet, shared by every invoice, so "never swept twice" is kept per
-- invoice and token (to_address is the token contract): at most one live
-- PULL for one invoice's token.

CREATE UNIQUE INDEX sweep_txs_live_pull ON sweep_txs (invoice_id, to_address)
    WHERE kind = 'PULL' AND status IN ('SIGNED', 'SENT', 'MINED');
