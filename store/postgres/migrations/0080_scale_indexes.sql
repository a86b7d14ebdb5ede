-- evmpay:no-transaction
-- Scale (docs/scale.md): a merchant's invoices listed by status, newest
-- first, read an index in exactly that order instead of walking all of the
-- merchant's invoices (invoices_merchant_id) and discarding the other
-- statuses: with a rare status (PENDING, CONFIRMED) and a deep cursor that
-- walk grew with the merchant's history.
--
-- Built CONCURRENTLY so that invoices stays writable while it builds (a
-- plain CREATE INDEX blocks every write for the whole build); this file
-- therefore runs outside a transaction (the marker line above), one
-- statement at a time, and drops a half-built index left by a failed run
-- before building again.
DROP INDEX CONCURRENTLY IF EXISTS invoices_merchant_status;
CREATE INDEX CONCURRENTLY invoices_merchant_status ON invoices (merchant_id, status, id DESC);
