-- The metrics count live invoices from their partial indexes and failed
-- deliveries from their own (store/postgres/migrations/0110 explains);
-- invoices_status served nothing else.
CREATE INDEX IF NOT EXISTS webhook_deliveries_failed ON webhook_deliveries (attempt) WHERE status = 'FAILED';
DROP INDEX IF EXISTS invoices_status;
