package webhook

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultSchedule is the retry ladder: the delay before each attempt,
// counted from the end of the previous one (the first from the delivery's
// creation). Eight attempts spread over about 28 hours.
func DefaultSchedule() []time.Duration {
	return []time.Duration{
		0,
		5 * time.Second,
		5 * time.Minute,
		30 * time.Minute,
		2 * time.Hour,
		5 * time.Hour,
		10 * time.Hour,
		10 * time.Hour,
	}
}

// leaseMargin is the time a lease must still have beyond Timeout before an
// attempt starts: for recording the result, and for clock skew between
// dispatchers.
const leaseMargin = 10 * time.Second

// Config tunes a Dispatcher. The zero value is usable: every field
// documents its default.
type Config struct {
	// Schedule is the retry ladder: Schedule[k] is the delay before
	// attempt k+1, counted from the end of attempt k (Schedule[0] from the
	// delivery's creation). Attempts past the end of the ladder wait its
	// last delay. Defaults to DefaultSchedule(): 0, 5 s, 5 min, 30 min,
	// 2 h, 5 h, 10 h, 10 h.
	Schedule []time.Duration
	// Jitter adds to each retry delay a random extra of up to this
	// fraction of it (0.1: up to +10 %), so that deliveries that failed
	// together do not retry together. Jitter never shortens a delay. A
	// negative value turns jitter off. Defaults to 0.1.
	Jitter float64
	// MaxAttempts is how many attempts a delivery gets (per run: a replay
	// starts a new run); when the last one fails the delivery is
	// permanently FAILED. At most 8 (DESIGN.md's limit). Defaults to 8.
	MaxAttempts int
	// MaxRetryAfter caps the delay a receiver may ask for with Retry-After
	// on a 429 or 503 response. Defaults to 24 hours.
	MaxRetryAfter time.Duration

	// Timeout bounds one attempt: connecting, sending, and reading the
	// response headers and body. Defaults to 15 seconds.
	Timeout time.Duration
	// MaxResponseBytes is how much of a response body is read (and thrown
	// away, so that the connection can be reused); the rest is not read.
	// Defaults to 4 KiB.
	MaxResponseBytes int64
	// Transport sends the requests. Redirects are never followed whatever
	// it is, and only http and https URLs are attempted. Defaults to a
	// transport with http.DefaultTransport's settings whose dialer refuses
	// private destinations when BlockPrivateNetworks is set.
	Transport http.RoundTripper
	// BlockPrivateNetworks refuses to connect to loopback, private
	// (RFC 1918, RFC 4193), link-local (cloud metadata at 169.254.169.254),
	// CGNAT, multicast and unspecified addresses, checked on the address
	// actually dialled (after DNS, so DNS rebinding does not get around
	// it). A URL whose host is such an address literal fails without
	// automatic retry; a host name that resolves to one is retried on the
	// ladder with the same neutral last_error as a name that does not
	// resolve, so merchants cannot probe internal names. Environment
	// proxies are not used when it is set. It cannot be combined with
	// Transport (put the check in your transport instead). Defaults to
	// false, because development and tests deliver to loopback; turn it on
	// in production.
	BlockPrivateNetworks bool
	// UserAgent is sent with every request. Defaults to "evmpay-webhooks/1".
	UserAgent string

	// Workers caps the requests in flight at once in this process.
	// Defaults to 64.
	Workers int
	// PerEndpoint caps the requests in flight at once to one merchant's
	// endpoint (its webhook_url) in this process. An endpoint whose last
	// attempt timed out or could not connect is down: it gets one request
	// at a time (a probe), and while the probe is out its other due
	// deliveries are recorded as failed attempts without a request and
	// move up their ladders; its first answer brings it back. So a hung
	// endpoint holds at most PerEndpoint workers, then one. Defaults to 4.
	PerEndpoint int
	// Lease is how long a claimed delivery stays reserved for this
	// dispatcher; another dispatcher takes it over only after the lease
	// expires (for example after a crash). An attempt starts only with at
	// least Timeout + 10 s of lease left, renewing it when needed. Must be
	// longer than Timeout + 10 s. Defaults to 1 minute, or Timeout + 30 s
	// when that is longer.
	Lease time.Duration
	// PollInterval is how often new events and due retries are looked for
	// when there is nothing to do. Defaults to 500 ms.
	PollInterval time.Duration
	// BatchSize is how many events become deliveries per transaction, and
	// the most deliveries claimed per query. Defaults to 100.
	BatchSize int

	// Now is the clock of the ladder and the leases. Defaults to time.Now.
	Now func() time.Time
	// Logger receives attempt failures (info: the endpoint's fault; warn:
	// ours) and database errors (error). Never a secret, a body or a full
	// URL. Defaults to a logger that discards everything.
	Logger *slog.Logger
	// Registerer receives the dispatcher's Prometheus collectors. Defaults
	// to a new private registry, available from Dispatcher.Gatherer.
	Registerer prometheus.Registerer
}

const (
	defaultJitter        = 0.1
	defaultMaxAttempts   = 8
	maxAttempts          = 8
	defaultMaxRetryAfter = 24 * time.Hour
	defaultTimeout       = 15 * time.Second
	defaultMaxResponse   = 4 << 10
	defaultUserAgent     = "evmpay-webhooks/1"
	defaultWorkers       = 64
	defaultPerEndpoint   = 4
	defaultLease         = time.Minute
	defaultPollInterval  = 500 * time.Millisecond
	defaultBatchSize     = 100
)

func (c Config) withDefaults() Config {
	if len(c.Schedule) == 0 {
		c.Schedule = DefaultSchedule()
	}
	c.Jitter = cmp.Or(c.Jitter, defaultJitter)
	if c.Jitter < 0 {
		c.Jitter = 0
	}
	c.MaxAttempts = cmp.Or(c.MaxAttempts, defaultMaxAttempts)
	c.MaxRetryAfter = cmp.Or(c.MaxRetryAfter, defaultMaxRetryAfter)
	c.Timeout = cmp.Or(c.Timeout, defaultTimeout)
	c.MaxResponseBytes = cmp.Or(c.MaxResponseBytes, defaultMaxResponse)
	c.UserAgent = cmp.Or(c.UserAgent, defaultUserAgent)
	c.Workers = cmp.Or(c.Workers, defaultWorkers)
	c.PerEndpoint = cmp.Or(c.PerEndpoint, defaultPerEndpoint)
	c.Lease = cmp.Or(c.Lease, max(defaultLease, c.Timeout+3*leaseMargin))
	c.PollInterval = cmp.Or(c.PollInterval, defaultPollInterval)
	c.BatchSize = cmp.Or(c.BatchSize, defaultBatchSize)
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config) validate() error {
	for i, d := range c.Schedule {
		if d < 0 {
			return fmt.Errorf("webhook: Schedule[%d] is negative", i)
		}
	}
	switch {
	case c.Jitter > 1:
		return errors.New("webhook: Jitter must be at most 1")
	case c.MaxAttempts < 1 || c.MaxAttempts > maxAttempts:
		return fmt.Errorf("webhook: MaxAttempts must be between 1 and %d", maxAttempts)
	case c.MaxRetryAfter < 0:
		return errors.New("webhook: MaxRetryAfter must not be negative")
	case c.Timeout <= 0:
		return errors.New("webhook: Timeout must be positive")
	case c.MaxResponseBytes <= 0:
		return errors.New("webhook: MaxResponseBytes must be positive")
	case c.Workers <= 0:
		return errors.New("webhook: Workers must be positive")
	case c.PerEndpoint <= 0:
		return errors.New("webhook: PerEndpoint must be positive")
	case c.Lease <= c.Timeout+leaseMargin:
		return fmt.Errorf("webhook: Lease must be longer than Timeout + %s", leaseMargin)
	case c.PollInterval <= 0:
		return errors.New("webhook: PollInterval must be positive")
	case c.BatchSize <= 0 || c.BatchSize > 1000:
		return errors.New("webhook: BatchSize must be between 1 and 1000")
	case c.Transport != nil && c.BlockPrivateNetworks:
		return errors.New("webhook: BlockPrivateNetworks cannot be combined with a custom Transport")
	}
	return nil
}
