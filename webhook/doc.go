// Package webhook owns evmpay's webhooks: it turns outbox events into
// signed, durable, retried deliveries to each merchant's webhook_url, lets
// merchants list and replay them, and gives Go receivers a verifier.
//
// # Sending
//
// Settlement and sweep write a store.Event in the same database transaction
// as the state change it reports. A Dispatcher turns each event into one
// store.Delivery and POSTs it:
//
//	d, err := webhook.New(st, creds, webhook.Config{BlockPrivateNetworks: true})
//	…
//	go d.Run(ctx) // until ctx is cancelled
//
// st is a *postgres.Store or *sqlite.Store; creds (an *invoice.Credentials)
// opens each merchant's encrypted webhook secret. Run any number of
// dispatchers on one PostgreSQL database: they share the work.
//
// The body is the JSON of a Payload:
//
//	{"id":"evt_123","type":"invoice.paid","created_at":"2026-11-21T12:00:00Z","data":{…the invoice…}}
//
// data is the invoice as the merchant API shows it when the event happened
// (never the lookup token). The request is signed per the Standard Webhooks
// specification, so any Standard Webhooks library verifies it:
//
//	webhook-id:        evt_123   (the event id: the same on every retry and replay)
//	webhook-timestamp: 1763726400 (Unix seconds of this attempt)
//	webhook-signature: v1,<base64 HMAC-SHA256(key, "evt_123.1763726400.<body>")>
//
// where key is the base64-decoded part of the merchant's "whsec_…" secret.
//
// # Outcomes and the retry ladder
//
// Every attempt is recorded on the delivery: delivered, response_status
// (NULL on a timeout or network error), attempt, last_attempt_at (the
// signed timestamp), next_attempt_at and a short last_error: the status
// line or a neutral class of network error ("timeout after 15s",
// "connection failed", "connection failed: host not found or not a public
// address", "refused: not a public address"), never a body, a secret, a
// resolver address or an internal host name (those go to the operator log
// only). A FAILED delivery has a FailureReason: FailedEndpointBroken or
// FailedAttemptsExhausted.
//
//   - 2xx: DELIVERED.
//   - 5xx, 408, 429, a timeout (Config.Timeout, 15 s) or a network error:
//     the next rung of the ladder (Config.Schedule: 0, 5 s, 5 min, 30 min,
//     2 h, 5 h, 10 h, 10 h, counted from the end of the failed attempt,
//     plus up to 10 % jitter). After attempt 8 (Config.MaxAttempts) fails
//     the delivery is permanently FAILED.
//   - Retry-After (seconds or an HTTP date) on a 429 or 503 is honoured
//     when it asks for longer than the rung, up to Config.MaxRetryAfter
//     (24 h); it never makes a retry sooner than the ladder, so a receiver
//     cannot burn through the attempts in seconds.
//   - Other 4xx, and 3xx (redirects are never followed): the endpoint
//     refuses this webhook and retrying will not change that, so the
//     delivery is FAILED at once, without automatic retry, and replayable.
//   - A merchant without a usable webhook_url (empty, not http/https, a
//     private address literal under BlockPrivateNetworks), disabled, or
//     missing: FAILED at once, replayable once fixed. A host name that
//     resolves only to refused addresses is retried like one that does not
//     resolve, with the same last_error.
//   - A secret that cannot be opened (our side): retried on the ladder;
//     nothing unsigned is ever sent.
//
// # Delivery guarantees
//
// Delivery is at least once. A dispatcher leases the deliveries it claims
// (FOR UPDATE SKIP LOCKED on PostgreSQL) and records each attempt only
// while it still holds the lease, so dispatchers never send the same
// attempt twice; an attempt starts only with Timeout + 10 s of lease left.
// A dispatcher that dies after the receiver answered but before recording
// leaves the lease to expire (Config.Lease, 1 min); another dispatcher then
// sends the same webhook again, with the same webhook-id. Receivers must
// deduplicate on webhook-id.
//
// A dispatcher holds at most 2 × Config.Workers claimed deliveries and
// sends at most Config.PerEndpoint (4) requests at once to one merchant's
// endpoint. Endpoints with 2 × PerEndpoint deliveries claimed are left out
// of the next claim, so a slow endpoint's backlog stays in the database,
// claimable by other dispatchers, and never delays other merchants'
// webhooks. An endpoint that answers faster than the claims refill its
// queue earns a deeper one, up to 8 × PerEndpoint, while the dispatcher
// holds fewer than Workers deliveries (so at least half of what it may
// hold stays for other merchants); it is back to 2 × PerEndpoint when an
// attempt to it times out or cannot connect.
//
// An endpoint whose last attempt timed out or could not connect is down:
// it gets one request at a time (a probe), and while the probe is out, its
// other due deliveries are recorded as failed attempts without a request
// (last_error "not sent: the endpoint is down …") and move up their own
// ladders. So a dead endpoint holds one worker, its deliveries still fail
// for good about 28 hours after their event (and can be replayed in bulk),
// and its backlog does not sit due in the database. Its first answer, of
// any status, brings it back.
//
// # Replay
//
// DeliveriesAPI serves the merchant API (authenticated by the host's
// Authenticator; a merchant sees only its own deliveries):
//
//	GET  /v1/webhook-deliveries?status=failed&since=<RFC 3339>&limit=50&cursor=<next_cursor>
//	GET  /v1/webhook-deliveries/{id}
//	POST /v1/webhook-deliveries/{id}/replay
//	POST /v1/webhook-deliveries/replay      {"since": "<RFC 3339>"}
//
// A replay sends the same event again: the same webhook-id and body, a new
// timestamp and signature. It resets the delivery for a new run of the
// ladder: status PENDING, attempt 0, due at once; attempt then counts the
// attempts of the current run (at most 8), the previous run's last status
// and error stay visible until the first attempt of the new run. FAILED and
// DELIVERED deliveries can be replayed (the latter re-sends one a receiver
// lost); a PENDING one is already on its way (409 delivery_pending).
// Replay-all replays every FAILED delivery of the merchant created at or
// after since — the same set GET ?status=failed&since= lists.
//
// # Receiving
//
// Verify (or a Verifier, which decodes the secret once) checks a received
// webhook's signature in constant time, among several space-separated
// ones, and its timestamp against a tolerance (5 minutes by default).
// examples/webhook-receiver is a complete receiver.
//
// # Security
//
// Config.BlockPrivateNetworks refuses loopback, private, link-local (cloud
// metadata), CGNAT and other non-public destinations, checked on the
// address actually dialled, so DNS rebinding does not get around it. It is
// off by default because development (payd dev) and tests deliver to
// loopback; production hosts should turn it on. Only http and https URLs
// are attempted, redirects are never followed, at most
// Config.MaxResponseBytes of a response are read, and the URL (which may
// carry credentials) is never logged or stored in last_error: logs name the
// delivery, event and merchant.
//
// # Metrics
//
// webhook_attempts_total{outcome="delivered|retry|failed|exhausted"}
// (exhausted: the final attempt failed — alert on it),
// webhook_attempt_duration_seconds, webhook_delivery_delay_seconds (event
// to successful delivery), webhook_events_dispatched_total and
// webhook_requests_in_flight.
package webhook
