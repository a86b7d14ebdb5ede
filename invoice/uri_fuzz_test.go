package invoice_test

import (
	"errors"
	"testing"

	"github.com/evmpay/evmpay/invoice"
)

// FuzzParsePaymentURI checks that ParsePaymentURI never panics, that every
// error wraps ErrInvalidPaymentURI and one kind, and that whatever it accepts
// formats to a URI that parses back to the same request. The seed corpus runs
// as a normal unit test; CI fuzzes it with:
//
//	go test -run '^$' -fuzz '^FuzzParsePaymentURI$' -fuzztime=5s ./invoice
func FuzzParsePaymentURI(f *testing.F) {
	for _, s := range []string{
		"ethereum:0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266@9000?value=2500000000000000000",
		"ethereum:0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266@1",
		"ETHEREUM:pay-0xF39FD6E51AAD88F6F4CE6AB8827279CFFFB92266@1?gas=21000&value=0",
		"ethereum:0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266@1?value=" + maxU256,
		"ethereum:0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266@1?value=2.014e18",
		"ethereum:0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266@1/transfer?address=0x1&uint256=1",
		"ethereum:0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266@0",
		"ethereum:0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266@1?value=1&value=2",
		"ethereum:vitalik.eth@1?value=1",
		"ethereum:",
		"",
	} {
		f.Add(s)
	}
	kinds := []error{
		invoice.ErrURISyntax, invoice.ErrURIScheme, invoice.ErrURIAddress, invoice.ErrURIChainID,
		invoice.ErrURIValue, invoice.ErrURIParam, invoice.ErrURIFunction,
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := invoice.ParsePaymentURI(s)
		if err != nil {
			if !errors.Is(err, invoice.ErrInvalidPaymentURI) {
				t.Fatalf("error does not wrap ErrInvalidPaymentURI: %v", err)
			}
			n := 0
			for _, k := range kinds {
				if errors.Is(err, k) {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("error wraps %d kinds: %v", n, err)
			}
			return
		}
		if p.ChainID == 0 || p.Address == ([20]byte{}) {
			t.Fatalf("accepted zero chain id or zero address: %+v", p)
		}
		out, err := invoice.FormatPaymentURI(p)
		if err != nil {
			t.Fatalf("accepted URI does not format: %v", err)
		}
		again, err := invoice.ParsePaymentURI(out)
		if err != nil {
			t.Fatalf("formatted URI %q does not parse: %v", out, err)
		}
		if again.Address != p.Address || again.ChainID != p.ChainID ||
			(again.Value == nil) != (p.Value == nil) || (p.Value != nil && !again.Value.Eq(p.Value)) {
			t.Fatalf("round trip changed %+v into %+v", p, again)
		}
	})
}
