package invoice

import (
	"errors"

	"github.com/evmpay/evmpay/store/problem"
)

// MerchantProblem is the problem the HTTP API answers a refused merchant
// change with (ErrInvalidMerchant: the field at fault, 400 or 422), or nil
// for any other error: for Go callers of UpdateMerchant and
// CreateMerchant that show the refusal as the API does.
func MerchantProblem(err error) *problem.Problem {
	if !errors.Is(err, ErrInvalidMerchant) {
		return nil
	}
	return merchantError(err)
}
