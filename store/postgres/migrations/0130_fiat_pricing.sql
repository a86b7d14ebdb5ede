-- Fiat-priced invoices (issue 25, docs/pricing.md).
--
-- pricing: the price, the merchant's underpayment tolerance at creation
-- and one locked quote per accepted asset, as JSON (store.Pricing); NULL
-- for an invoice priced in its asset. Fixed at creation.
-- paid_value: what the counted payments are worth at the locked quotes,
-- in minor units of the price's currency (settlement writes it).
-- late_valuation: the locked and current valuations of money that arrived
-- after the late window (store.LateValuation, JSON).
-- sweep_asset: the asset a fiat invoice's sweep moves first (store.Asset,
-- JSON), chosen when the sweep is queued.
ALTER TABLE invoices ADD COLUMN pricing TEXT;
ALTER TABLE invoices ADD COLUMN paid_value NUMERIC(78,0) CHECK (paid_value >= 0);
ALTER TABLE invoices ADD COLUMN late_valuation TEXT;
ALTER TABLE invoices ADD COLUMN sweep_asset TEXT;
ALTER TABLE invoices_archive ADD COLUMN pricing TEXT;
ALTER TABLE invoices_archive ADD COLUMN paid_value NUMERIC(78,0) CHECK (paid_value >= 0);
ALTER TABLE invoices_archive ADD COLUMN late_valuation TEXT;
ALTER TABLE invoices_archive ADD COLUMN sweep_asset TEXT;

-- A merchant's underpayment tolerance (store.MerchantTolerance, JSON; ''
-- forgives nothing): a percentage and an amount per currency.
ALTER TABLE merchants ADD COLUMN underpayment_tolerance TEXT NOT NULL DEFAULT '';
