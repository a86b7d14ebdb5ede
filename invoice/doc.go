// Package invoice owns merchants and credentials, invoice creation and reads,
// lookup tokens, EIP-681 payment URIs and QR codes, and the invoice API
// http.Handler.
//
// # Starting
//
//	creds, err := invoice.NewCredentials(paySecretKey)        // PAY_SECRET_KEY, ≥ 32 bytes
//	deriver, err := hdwallet.NewDeriver(xpub)                  // public only: never a private key
//	svc, err := invoice.New(st, creds, deriver, chainID, invoice.Config{
//		BaseURL:    "https://pay.example.com",
//		AdminToken: operatorToken,                              // PAY_ADMIN_TOKEN; "" turns /v1/admin off
//	})
//	mux := http.NewServeMux()
//	svc.Routes(mux)                                            // beside other packages' routes
//	go svc.Run(ctx)                                            // optional: purges expired Idempotency-Keys
//
// # Routes
//
// Routes registers Go 1.22 method+path patterns on the host's mux, so the
// invoice API shares one ServeMux with the indexer's /v1/blocks/…, webhook's
// /v1/webhook-deliveries… and sweep's /v1/admin/sweeps/…. It owns exactly:
//
//	POST  /v1/invoices                          create (Idempotency-Key required)
//	GET   /v1/invoices                          list: status, created_after, created_before, limit, cursor
//	GET   /v1/invoices/{id}                     read
//	GET   /v1/invoices/{id}/qr.png, /qr.svg     the payment URI as a QR code
//	GET   /v1/merchant, PATCH /v1/merchant      profile; change name, webhook_url, settlement_address
//	POST  /v1/merchant/api-key/rotate           new api_key (shown once); the old one fails at once
//	POST  /v1/merchant/webhook-secret/rotate    new webhook secret (shown once)
//	GET   /v1/merchant/branding, PUT …          the checkout page's logo and accent colour
//	POST  /v1/admin/merchants                   operator: create a merchant (Bearer AdminToken)
//	POST  /v1/admin/merchants/{id}/api-key/rotate  operator: recover a lost api_key
//	GET   /v1/public/invoice                    payer view by lookup token (Bearer lookup_token)
//	GET   /v1/public/invoice/qr.svg, /branding, /logo  what the checkout page shows besides
//	GET   /v1/openapi.json                      the OpenAPI 3.1 document of all of the above
//
// For each of these paths it also registers the bare path, which answers
// any other method with a 405 problem and an Allow header. Handler returns a
// mux with only these routes; PublicHandler serves the public read alone.
//
// # Credentials
//
// NewCredentials derives three subkeys from PAY_SECRET_KEY with HKDF-SHA256
// (info labels "evmpay/v1/api-key-lookup-hmac",
// "evmpay/v1/webhook-secret-aes-256-gcm",
// "evmpay/v1/idempotent-response-aes-256-gcm"). An api_key is "evmpay_sk_"
// plus 32 random bytes in base64url; it is stored as an HMAC-SHA256 lookup
// digest and an Argon2id hash (m = 19 MiB, t = 2, p = 1). The Authenticator
// costs one HMAC and one indexed lookup per request; the Argon2id hash is
// verified once per key per process and then cached by digest. Because the
// merchant row is read on every request, a rotated key or a disabled
// merchant fails on the next request in every replica. A merchant's own
// rotation succeeds only if, under the row lock, the key it authenticated
// with is still current: of concurrent rotations with one key, one wins and
// the others get 401, so every key handed out works. A webhook secret is
// "whsec_" plus the base64 of 32 random bytes, sealed with AES-256-GCM
// (random nonce, the merchant id as associated data);
// Credentials.WebhookSecret opens it for the webhook signer. Lookup tokens
// are 128 random bits in base64url, stored as SHA-256.
//
// # Idempotent creation
//
// POST /v1/invoices commits an IN_FLIGHT Idempotency-Key record first (a
// concurrent request with the same key gets 409), then one transaction takes
// the next derivation index, inserts the invoice with its deposit address
// and EIP-681 payment_uri, and marks the record DONE with the response
// sealed (it holds the once-shown lookup_token). The same key and the same
// method, path and body replay that response byte for byte, with
// Idempotent-Replayed: true; a different request with the key gets 422. A
// record left IN_FLIGHT by a dead process is claimed by a retry after
// Config.IdempotencyLease; a request that fails before committing frees its
// key at once. Keys are kept for Config.IdempotencyTTL (at least 24 h).
//
// Concurrent creations in one process share that transaction (group
// commit): one committer goroutine writes whatever is queued, up to
// Config.CreateBatchSize invoices, with one counter update, one multi-row
// insert and one commit; a batch that fails is retried one request at a
// time, so one bad request fails alone. The committer runs only while
// creations are queued, and each request waits for its answer, so
// http.Server.Shutdown drains it; there is nothing to start or stop.
//
// # Fiat prices
//
// With Config.Pricer (an *pricing.Pricer) a request may give "price"
// ({"amount": "49.90", "currency": "EUR"}) and "accept" (assets by symbol
// or address; default every asset of Config.Assets the Pricer prices)
// instead of an asset amount: one locked quote per accepted asset is made
// with the key held and stored with the invoice, whose own asset, amount
// and payment URI are its first quote's. Without a rate the answer is 503
// rate_unavailable with Retry-After, nothing is created and the key is
// released. The merchant's underpayment tolerance (PATCH /v1/merchant) is
// snapshotted on every new fiat invoice. docs/pricing.md.
//
// # Merchant checks
//
// Config.Merchants (MerchantRules) refuses with 422, at merchant create and
// update, a webhook_url whose host fails a host check (payd passes
// webhook.CheckPublicHost when private networks are refused), a
// settlement_address the service holds (any deposit address, looked up in
// the store, and MerchantRules.ServiceAddresses: the sweep wallet, the gas
// funder), and, given a CodeReader, a settlement_address with contract
// code. Addresses leave the API in EIP-55 (store.ChecksumAddress); a
// mixed-case input must carry a valid checksum.
//
// # Errors
//
// Every failure is an RFC 9457 application/problem+json body with a stable
// code ("invalid_amount", "unknown_field", "idempotency_key_reused", …) and,
// for a bad request member or query parameter, the field at fault. Another
// merchant's invoice is 404, exactly like a missing one.
//
// # Payment requests
//
// [FormatPaymentURI] turns a deposit address, chain id and amount into
// "ethereum:<EIP-55 address>@<chainId>?value=<wei>", [ParsePaymentURI] reads
// one back strictly, and [QRPNG] and [QRSVG] draw the URI as a QR code (error
// correction M, 4-module quiet zone) for wallets to scan.
package invoice
