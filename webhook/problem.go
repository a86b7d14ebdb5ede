package webhook

// Stable problem codes of the deliveries API. Clients switch on them.
const (
	codeUnauthorized     = "unauthorized"
	codeNotFound         = "not_found"
	codeUnknownParameter = "unknown_parameter"
	codeInvalidParameter = "invalid_parameter"
	codeInvalidCursor    = "invalid_cursor"
	codeInvalidJSON      = "invalid_json"
	codeMissingField     = "missing_field"
	codeInvalidField     = "invalid_field"
	codeBodyTooLarge     = "body_too_large"
	codeDeliveryPending  = "delivery_pending"
	codeUnavailable      = "unavailable"
	codeInternal         = "internal"
)
