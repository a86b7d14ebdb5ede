-- Settlement's confirmation pass probes each PAID invoice's payments above
-- a block: one index on (invoice_id, block_number) answers it and every
-- lookup by invoice_id (store/postgres/migrations/0100 explains).
CREATE INDEX IF NOT EXISTS payments_invoice_block ON payments (invoice_id, block_number);
DROP INDEX IF EXISTS payments_invoice;
