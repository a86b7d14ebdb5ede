-- The id a host gives a merchant in its own system (issue #34): a host
-- that embeds evmpay gets or creates its merchant by it at every start
-- (invoice.Service.EnsureMerchant), with no API key to keep.
ALTER TABLE merchants ADD COLUMN external_id TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX merchants_external_id ON merchants (external_id) WHERE external_id <> '';
