package pricing

import (
	"errors"
	"fmt"
	"time"
)

var (
	// ErrRateUnavailable: no rate fresh and agreed enough to quote with.
	// Errors that wrap it are *UnavailableError, which carries a retry
	// hint; the API answers 503 rate_unavailable with Retry-After and
	// creates nothing.
	ErrRateUnavailable = errors.New("pricing: rate unavailable")
	// ErrDepegged: a stablecoin configured to be refused off its peg is
	// outside its band. It comes wrapped in an *UnavailableError (so it is
	// also ErrRateUnavailable).
	ErrDepegged = errors.New("pricing: stablecoin off its peg")
	// ErrUnknownAsset: the asset is not one the Pricer prices (Config.Assets).
	ErrUnknownAsset = errors.New("pricing: asset not priced")
	// ErrUnsupportedCurrency: the currency is not one the Pricer quotes in
	// (Config.Currencies).
	ErrUnsupportedCurrency = errors.New("pricing: currency not supported")
	// ErrInvalidPrice: the price is zero.
	ErrInvalidPrice = errors.New("pricing: price must be more than zero")
)

// UnavailableError says why no rate could be had for Asset in Currency and
// when to try again.
type UnavailableError struct {
	Asset, Currency string
	// Reason says what was missing ("ETH/USD: 1 of 2 sources needed (kraken: stale)").
	Reason string
	// RetryAfter is the time until the next refresh of the rates (at least
	// a second): the Retry-After of a 503.
	RetryAfter time.Duration
	// Depegged is true when the asset is a stablecoin refused off its peg.
	Depegged bool
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("pricing: no rate for %s in %s: %s", e.Asset, e.Currency, e.Reason)
}

// Is makes errors.Is(err, ErrRateUnavailable) true, and errors.Is(err,
// ErrDepegged) true for a depegged stablecoin.
func (e *UnavailableError) Is(target error) bool {
	return target == ErrRateUnavailable || target == ErrDepegged && e.Depegged
}

// RetryAfter returns the retry hint of an unavailable-rate error anywhere
// in err's chain.
func RetryAfter(err error) (time.Duration, bool) {
	var u *UnavailableError
	if errors.As(err, &u) {
		return u.RetryAfter, true
	}
	return 0, false
}
