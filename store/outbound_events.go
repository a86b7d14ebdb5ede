package store

// Event types of refunds and payouts: the same lifecycle for both, signed
// and delivered like every event. Their data is the refund's or payout's
// JSON at that moment (store/api.Outbound); a refund's event carries its
// invoice's id, a payout's none (0).
const (
	EventRefundCreated             = "refund.created"
	EventRefundAwaitingDestination = "refund.awaiting_destination"
	EventRefundAwaitingApproval    = "refund.awaiting_approval"
	EventRefundAwaitingPayment     = "refund.awaiting_payment"
	EventRefundBroadcast           = "refund.broadcast"
	EventRefundConfirmed           = "refund.confirmed"
	EventRefundFailed              = "refund.failed"
	EventRefundCancelled           = "refund.cancelled"

	EventPayoutCreated          = "payout.created"
	EventPayoutAwaitingApproval = "payout.awaiting_approval"
	EventPayoutAwaitingPayment  = "payout.awaiting_payment"
	EventPayoutBroadcast        = "payout.broadcast"
	EventPayoutConfirmed        = "payout.confirmed"
	EventPayoutFailed           = "payout.failed"
	EventPayoutCancelled        = "payout.cancelled"
)

// OutboundEventTypes lists the refund and payout event types, in the order
// merchants meet them.
func OutboundEventTypes() []string {
	return []string{
		EventRefundCreated, EventRefundAwaitingDestination, EventRefundAwaitingApproval, EventRefundAwaitingPayment,
		EventRefundBroadcast, EventRefundConfirmed, EventRefundFailed, EventRefundCancelled,
		EventPayoutCreated, EventPayoutAwaitingApproval, EventPayoutAwaitingPayment, EventPayoutBroadcast,
		EventPayoutConfirmed, EventPayoutFailed, EventPayoutCancelled,
	}
}

// OutboundEventType is the event type of an outbound kind ("REFUND",
// "PAYOUT") entering a status: "refund.awaiting_approval", …; "created"
// for the creation itself. "" for a status without an event.
func OutboundEventType(kind, status string) string {
	prefix := "payout."
	if kind == OutboundRefund {
		prefix = "refund."
	}
	var what string
	switch status {
	case "created":
		what = "created"
	case OutboundAwaitingDestination:
		if kind != OutboundRefund {
			return ""
		}
		what = "awaiting_destination"
	case OutboundAwaitingApproval:
		what = "awaiting_approval"
	case OutboundAwaitingPayment:
		what = "awaiting_payment"
	case OutboundBroadcast:
		what = "broadcast"
	case OutboundConfirmed:
		what = "confirmed"
	case OutboundFailed:
		what = "failed"
	case OutboundCancelled:
		what = "cancelled"
	default:
		return ""
	}
	return prefix + what
}
