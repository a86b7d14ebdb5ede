-- Wrong-asset token sweeps (docs/tokens.md): the transactions that move a
-- token paid to the wrong invoice (a token at a native invoice, another
-- token at a token invoice) name that token, so that an invoice's own sweep
-- and each wrong token's sweep are told apart — their fundings in
-- particular, which all go to the deposit address. NULL: the invoice's own
-- sweep (and every transaction stored before this migration).
--
-- A nullable column with no default is a catalogue change (no rewrite);
-- lock_timeout keeps it from queueing writers behind a long transaction.
SET LOCAL lock_timeout = '3s';
ALTER TABLE sweep_txs ADD COLUMN wrong_token BYTEA;
