-- Checkout: where the hosted checkout page sends the payer back once the
-- invoice is paid ('' when the merchant gave no redirect_url). The archive
-- keeps the same columns in the same order.

ALTER TABLE invoices ADD COLUMN redirect_url TEXT NOT NULL DEFAULT '';
ALTER TABLE invoices_archive ADD COLUMN redirect_url TEXT NOT NULL DEFAULT '';
