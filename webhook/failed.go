package webhook

import "github.com/evmpay/evmpay/store"

// Why a delivery ended FAILED: the label of the operator's
// failed-deliveries counts and metric, and the failure_reason the
// merchant's delivery list shows. Every FAILED delivery has one.
const (
	// FailedEndpointBroken: the delivery failed before the end of its
	// ladder because retrying would not help — the endpoint refused it (a
	// 4xx such as 404 or 410, a redirect), its host is a private address
	// literal, or the merchant cannot be delivered to (disabled, no or a
	// bad webhook_url).
	FailedEndpointBroken = "endpoint_broken"
	// FailedAttemptsExhausted: every attempt of the ladder failed (5xx,
	// 429, timeouts, connection failures).
	FailedAttemptsExhausted = "attempts_exhausted"
)

// MaxAttempts is the most attempts Config.MaxAttempts allows (and its
// default): DESIGN.md's limit of 8.
const MaxAttempts = maxAttempts

// FailureReason returns why a FAILED delivery failed, given the
// dispatcher's Config.MaxAttempts (0 means the default, MaxAttempts): "" for
// a delivery that is not FAILED.
func FailureReason(d store.Delivery, maxAttempts int) string {
	if d.Status != store.DeliveryFailed {
		return ""
	}
	if maxAttempts <= 0 {
		maxAttempts = MaxAttempts
	}
	if d.Attempt >= maxAttempts {
		return FailedAttemptsExhausted
	}
	return FailedEndpointBroken
}
