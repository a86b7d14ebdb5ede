-- Settlement: the blocks it processed (number and hash), so that after a
-- reorg it can walk back to the common ancestor with the indexed chain; and
-- partial indexes for its candidate queries (PAID invoices awaiting
-- confirmations, CONFIRMED invoices awaiting a sweep).

CREATE TABLE settlement_blocks (
    number BIGINT PRIMARY KEY,
    hash   BLOB   NOT NULL
);

CREATE INDEX invoices_paid ON invoices (id) WHERE status = 'PAID';
CREATE INDEX invoices_confirmed ON invoices (confirmed_at, id) WHERE status = 'CONFIRMED';
