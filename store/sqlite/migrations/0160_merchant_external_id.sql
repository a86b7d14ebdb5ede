-- The id a host gives a merchant in its own system (issue #34).
ALTER TABLE merchants ADD COLUMN external_id TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX merchants_external_id ON merchants (external_id) WHERE external_id <> '';
