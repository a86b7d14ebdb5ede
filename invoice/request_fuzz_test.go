package invoice

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzParseInvoiceRequest: any body either parses into a request within
// every bound or is refused with a 400 problem; it never panics.
func FuzzParseInvoiceRequest(f *testing.F) {
	for _, seed := range []string{
		`{"amount_wei":"1500000000000000000"}`,
		`{"amount_wei":"1","expires_in_seconds":60,"order_id":"o","description":"d","metadata":{"a":[1,{"b":null}]}}`,
		`{"amount_wei":"1000000000000000000000000001"}`,
		`{"amount_wei":1}`, `{"amount":"1"}`, `{"asset":"ETH","amount_formatted":"0.5"}`, `{"asset":"USDC","amount":"1"}`, `[]`, `{"amount_wei":"1"}{}`, `{"amount_wei":"1","amount_wei":"1"}`,
		`{"amount_wei":"1","metadata":{"k":"\ud800","n":1e999999,"z":"\u0000","d":[[[[]]]]}}`,
		`{"amount_wei":"1","description":"\ud83d\ude00\udc00"}`,
	} {
		f.Add([]byte(seed))
	}
	cfg := Config{}
	cfg.fill()
	native, err := newAssetSet(nil)
	if err != nil {
		f.Fatal(err)
	}
	s := &Service{cfg: cfg, chains: []*chain{{id: 1337, assets: native, confirmations: 12}}}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, perr := s.parseInvoiceRequest(body)
		if perr != nil {
			if perr.Status != 400 || perr.Code == "" {
				t.Fatalf("refusal %+v is not a 400 with a code", perr)
			}
			return
		}
		if !utf8.Valid(body) {
			t.Fatal("accepted a body that is not UTF-8")
		}
		if req.amount.IsZero() || req.amount.Cmp(*cfg.MaxAmount) > 0 {
			t.Fatalf("accepted amount %s", req.amount)
		}
		if req.expiresIn < cfg.MinExpiry || req.expiresIn > cfg.MaxExpiry {
			t.Fatalf("accepted expiry %s", req.expiresIn)
		}
		if len(req.orderID) > maxOrderIDLen || len(req.description) > maxDescriptionLen {
			t.Fatal("accepted an over-long string")
		}
		if err := checkInteroperable(body, 0); err != nil {
			t.Fatalf("accepted a body that breaks receivers: %v", err)
		}
		if req.metadata != nil {
			var obj map[string]any
			if err := json.Unmarshal(req.metadata, &obj); err != nil || len(req.metadata) > cfg.MaxMetadataBytes {
				t.Fatalf("accepted metadata %q", req.metadata)
			}
		}
	})
}
