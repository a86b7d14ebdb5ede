// Package checkout serves the hosted checkout page: the payer's side of an
// invoice, an http.Handler with its script, style and message catalogue
// embedded (no build step, nothing fetched from a third party).
//
// Invoice creation answers checkout_url, "<base>/checkout#<lookup_token>".
// The token is the URL fragment, which browsers send to no server and put
// in no Referer, so it never reaches an access log. The page reads it and
// polls the invoice API's public read (GET /v1/public/invoice, the token
// as bearer) every Config.PollInterval, showing the invoice as it moves:
// waiting for payment (amount, address, QR code, "Open in wallet" and,
// when the browser has a wallet, "Pay with browser wallet" through
// EIP-1193), payment seen with its transaction and confirmations,
// underpaid with the remainder, confirmed (the payer's final state: a
// receipt to print or download, then back to the merchant), or expired.
// Numbers follow the payer's locale; the merchant's logo and accent colour
// come from the service itself.
//
// A deployment on several chains lists them in Config.Networks (name,
// native coin, public RPC URL, explorers per chain id): the page uses the
// network of the chain being paid — the picked quote's for a fiat invoice,
// else the invoice's — for what it shows and what it asks the wallet.
//
// Every answer carries a strict Content-Security-Policy (no inline
// script, default-src 'self'), Referrer-Policy: no-referrer and
// X-Content-Type-Options: nosniff. Messages live in messages/<lang>.json
// (en, de, es, fr, pt): adding a language is adding one file. See
// docs/checkout.md.
package checkout
