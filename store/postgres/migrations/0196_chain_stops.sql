-- A chain whose indexer, settlement and sweep stopped while their process
-- went on (payd: its node serves another chain, or its indexer refused a
-- reorg): one row per stopped chain, written by the process that stopped
-- and deleted by one that starts the chain's parts again. An API process
-- that does not run the chain reads it to refuse new invoices there
-- (docs/chains.md).
--
-- A new table: no lock on any existing one.
CREATE TABLE chain_stops (
    chain_id   BIGINT      PRIMARY KEY,
    problem    TEXT        NOT NULL CHECK (problem <> ''),
    stopped_at TIMESTAMPTZ NOT NULL
);
