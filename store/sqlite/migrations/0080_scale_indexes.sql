-- Scale (docs/scale.md): a merchant's invoices listed by status, newest
-- first, read an index in exactly that order. (SQLite has one writer and
-- no CONCURRENTLY; the PostgreSQL file builds it without blocking writes.)
CREATE INDEX IF NOT EXISTS invoices_merchant_status ON invoices (merchant_id, status, id DESC);
