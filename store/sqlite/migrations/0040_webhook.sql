-- Webhooks: claims read due deliveries oldest first (ORDER BY
-- next_attempt_at, id). An index in exactly that order lets the claim stop
-- after the rows it needs instead of reading and sorting every due
-- delivery, which matters when an endpoint has a large backlog.

DROP INDEX webhook_deliveries_due;
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at, id) WHERE status = 'PENDING';
