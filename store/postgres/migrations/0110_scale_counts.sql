-- evmpay:no-transaction
-- Counts that cost the same at a year of history as on the first day
-- (docs/scale.md, "What a metrics scrape reads"):
--
-- invoices_status (status) served only the metrics' count of every invoice
-- by status (0.3–0.8 s at 10 M invoices, on every scrape of every
-- process), now a count of the live statuses from their partial indexes.
-- Every other query by status has a narrower index: invoices_merchant_status,
-- or the partial indexes of PENDING, PAID and CONFIRMED. As a full index on
-- the column every settlement transition changes, it cost an entry on each
-- invoice insert and on each status update (none of which is HOT).
--
-- webhook_deliveries_failed answers the count of deliveries failed for
-- good (0.25–0.4 s twice per scrape as a scan of 5 M deliveries) from an
-- index of the failed ones alone.
--
-- CONCURRENTLY, one statement at a time, safe to run again from the top
-- (docs/scale.md, migrations on big tables).
DROP INDEX CONCURRENTLY IF EXISTS webhook_deliveries_failed;
CREATE INDEX CONCURRENTLY webhook_deliveries_failed ON webhook_deliveries (attempt) WHERE status = 'FAILED';
DROP INDEX CONCURRENTLY IF EXISTS invoices_status;
