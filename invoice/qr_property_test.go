//go:build !race

// The property test runs without the race detector: it is one goroutine
// (and zbarimg processes), so the detector finds nothing in it, and it
// makes the test's 2,000 QR encodings and decodings some twenty times
// slower (277 s against 12 s, both on a shared, loaded 2-core machine).
// scripts/test.sh runs it after the race-detecting run
// (go test -run TestQR_RandomPaymentURIs ./invoice/).

package invoice_test

import (
	"bytes"
	"fmt"
	"image/png"
	mrand "math/rand/v2"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/holiman/uint256"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/evmpaytest/qrscan"
	"github.com/evmpay/evmpay/invoice"
)

// TestQR_RandomPaymentURIs_TwoDecodersReadEveryServedCode is the property
// the checkout page and the API rely on: the QR code served for any
// payment URI — native or token, any address, chain id and amount; the
// PNG at 3 to 8 px per module and at 256 px (the API's default),
// and the SVG — decodes back to exactly that URI with two decoders that
// share no code (the module grid decoded by gozxing's decoder, and ZBar
// scanning the pixels), read without a correction, with a quiet zone of at
// least the 4 modules the QR standard requires (exactly 4 in the SVG,
// which the page shows at its natural size).
func TestQR_RandomPaymentURIs_TwoDecodersReadEveryServedCode(t *testing.T) {
	t.Parallel()
	const n = 1000
	seed := uint64(time.Now().UnixNano())
	rng := mrand.New(mrand.NewPCG(seed, seed>>1))
	t.Logf("seed %d", seed) // a failure names the seed that reproduces it

	var files [][]byte
	var want []string
	for i := range n {
		uri := randomURI(t, rng, i%2 == 0)
		svg, err := invoice.QRSVG(uri)
		require.NoError(t, err)
		modules, err := qrscan.SVGModules(svg)
		require.NoError(t, err, "the SVG of %s", uri)
		sym, err := qrscan.ReadModules(modules)
		requireQR(t, sym, err, uri, "the SVG")
		require.Equal(t, qrscan.QuietZone, sym.Quiet, "the SVG of %s", uri)
		total := len(modules)

		size := 256
		if i%4 != 0 {
			size = 3*total + rng.IntN(5*total+1) // 3 to 8 px per module
		}
		b, err := invoice.QRPNG(uri, size)
		require.NoError(t, err)
		img, err := png.Decode(bytes.NewReader(b))
		require.NoError(t, err)
		psym, err := qrscan.Read(img)
		requireQR(t, psym, err, uri, fmt.Sprintf("the %d px PNG", size))
		require.Equal(t, sym.Size, psym.Size, "the PNG and the SVG draw the same symbol")

		// The SVG's modules for the scanner at 4 px each (the browser
		// paints 8: TestQRSVG_SameModulesAndDecodesBackToTheURI).
		files = append(files, b, qrscan.PGM(qrscan.Raster(modules, 4)))
		want = append(want, uri, uri)
	}
	for i, got := range qrscan.Zbar(t, files...) {
		what := "PNG"
		if i%2 == 1 {
			what = "SVG"
		}
		require.Equal(t, []string{want[i]}, got, "ZBar scans the %s of %s (seed %d)", what, want[i], seed)
	}
}

// randomURI is a payment URI as the service writes them, native or an
// ERC-20 transfer: random addresses, a chain id of any length, an amount of
// any size (zero and none included).
func randomURI(t *testing.T, rng *mrand.Rand, native bool) string {
	t.Helper()
	var a, b common.Address
	for i := range a {
		a[i], b[i] = byte(rng.Uint32()), byte(rng.Uint32())
	}
	chain := max(1, rng.Uint64()>>rng.IntN(64))
	var amount *uint256.Int
	if rng.IntN(10) != 0 {
		var raw [32]byte
		for i := range raw {
			raw[i] = byte(rng.Uint32())
		}
		amount = new(uint256.Int).SetBytes(raw[:rng.IntN(33)])
	}
	var (
		uri string
		err error
	)
	if native {
		uri, err = invoice.FormatPaymentURI(invoice.PaymentURI{Address: a, ChainID: chain, Value: amount})
	} else {
		uri, err = invoice.FormatTransferURI(invoice.TransferURI{Token: a, ChainID: chain, To: b, Amount: amount})
	}
	require.NoError(t, err)
	return uri
}
