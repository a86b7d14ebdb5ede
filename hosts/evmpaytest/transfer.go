package evmpaytest

import (
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/holiman/uint256"

	"github.com/evmpay/evmpay/invoice"
)

// Transfer sends amount (base units) of a token (nil: the native coin)
// from a funded account to `to` — any amount, an invoice's or not (an
// underpayment, an overpayment, a payment in another asset) — mines it and
// returns its receipt, as PayFrom does for a payment request.
func (c *Chain) Transfer(from Account, token *common.Address, to common.Address, amount *big.Int) *types.Receipt {
	c.tb.Helper()
	v, overflow := uint256.FromBig(amount)
	if overflow || amount.Sign() <= 0 {
		c.tb.Fatalf("evmpaytest: transfer of %s: want a positive amount below 2^256", amount)
	}
	var (
		uri string
		err error
	)
	if token == nil {
		uri, err = invoice.FormatPaymentURI(invoice.PaymentURI{Address: to, ChainID: c.ID(), Value: v})
	} else {
		uri, err = invoice.FormatTransferURI(invoice.TransferURI{Token: *token, ChainID: c.ID(), To: to, Amount: v})
	}
	if err != nil {
		c.tb.Fatalf("evmpaytest: transfer: %v", err)
	}
	return c.PayFrom(from, uri)
}
