package invoice_test

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/holiman/uint256"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/evmpaytest/qrscan"
	"github.com/evmpay/evmpay/invoice"
)

func testURIs(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, p := range []invoice.PaymentURI{
		{Address: common.HexToAddress(addrLower), ChainID: 9000, Value: uint256.MustFromDecimal("2500000000000000000")},
		{Address: common.HexToAddress("0x70997970C51812dc3A010C7d01b50e0d17dc79C8"), ChainID: 1},
		{Address: common.HexToAddress("0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"), ChainID: 1<<64 - 1, Value: uint256.MustFromDecimal(maxU256)},
	} {
		s, err := invoice.FormatPaymentURI(p)
		require.NoError(t, err)
		out = append(out, s)
	}
	return out
}

// knownDetectorTraps are payment URIs whose 360-pixel PNG gozxing's QR
// detector cannot find (QRCodeReader without the PURE_BARCODE hint:
// "NotFoundException: dimension = 31"; about 1 random deposit address in
// 75), though the symbols are valid: the reason the tests read the module
// grid instead (qrscan) and check with a second, independent scanner.
var knownDetectorTraps = []string{
	"ethereum:0xF16F39B3dEC317Ddb108d525a0e0102B632766c9@1337?value=1000000000000000000",
	"ethereum:0xfcaD605D69513482C8226eE8f324223D5C5F30b0@1337?value=1000000000000000000",
	"ethereum:0xA253845D105778Ac9C42158B54bC98dE72b065c4@1337?value=1000000000000000000",
}

// requireQR reads a served QR code back (the module grid, decoded:
// qrscan.Read) and checks what every one of them must be: the URI, level
// M, read without a correction, a quiet zone of at least 4 modules.
func requireQR(t *testing.T, sym qrscan.Symbol, err error, uri, what string) {
	t.Helper()
	require.NoError(t, err, "%s of %s", what, uri)
	require.Equal(t, uri, sym.Text, what)
	require.Equal(t, "M", sym.Level, what)
	require.Zero(t, sym.Corrected, "%s: every module read as drawn", what)
	require.GreaterOrEqual(t, sym.Quiet, qrscan.QuietZone, "%s of %s: the quiet zone the QR standard requires", what, uri)
}

func TestQRPNG_DecodesBackToTheURI(t *testing.T) {
	t.Parallel()
	uris := append(testURIs(t), knownDetectorTraps...)
	var files [][]byte
	var want []string
	for _, uri := range uris {
		for _, size := range []int{200, 256, 360, 512} {
			b, err := invoice.QRPNG(uri, size)
			require.NoError(t, err)
			img, err := png.Decode(bytes.NewReader(b))
			require.NoError(t, err)
			require.Equal(t, image.Rect(0, 0, size, size), img.Bounds())
			sym, err := qrscan.Read(img)
			requireQR(t, sym, err, uri, fmt.Sprintf("the %d px PNG", size))
			files, want = append(files, b), append(want, uri)
		}
	}
	for i, got := range qrscan.Zbar(t, files...) {
		require.Equal(t, []string{want[i]}, got, "ZBar scans image %d", i)
	}
}

func TestQRPNG_QuietZoneOfAtLeastFourModules(t *testing.T) {
	t.Parallel()
	uri := testURIs(t)[0]
	svg, err := invoice.QRSVG(uri)
	require.NoError(t, err)
	modules, err := qrscan.SVGModules(svg)
	require.NoError(t, err)
	n := len(modules) // quiet zone included
	for _, size := range []int{n, 2*n + 1, 256, 512, 1001} {
		b, err := invoice.QRPNG(uri, size)
		require.NoError(t, err)
		img, err := png.Decode(bytes.NewReader(b))
		require.NoError(t, err)
		sym, err := qrscan.Read(img)
		require.NoError(t, err, "size %d", size)
		scale := size / n
		require.Equal(t, scale, sym.ModulePixels, "size %d: every module is size / modules pixels", size)
		require.Equal(t, n-2*qrscan.QuietZone, sym.Size)
		require.GreaterOrEqual(t, sym.Quiet, qrscan.QuietZone, "size %d", size)
		// The PNG matches the module grid, centred: pixels left over
		// only widen the quiet zone.
		offset := (size - scale*n) / 2
		for y := range n {
			for x := range n {
				px := img.At(offset+x*scale+scale/2, offset+y*scale+scale/2)
				require.Equal(t, modules[y][x], dark(px), "size %d: module (%d,%d)", size, x, y)
			}
		}
	}
}

func TestQRSVG_SameModulesAndDecodesBackToTheURI(t *testing.T) {
	t.Parallel()
	var files [][]byte
	var want []string
	for _, uri := range append(testURIs(t), knownDetectorTraps...) {
		svg, err := invoice.QRSVG(uri)
		require.NoError(t, err)
		requireWellFormedXML(t, svg)
		require.Contains(t, string(svg), `shape-rendering="crispEdges"`)
		require.Equal(t, 1, strings.Count(string(svg), "<path"), "one path")

		sym, err := qrscan.ReadSVG(svg)
		requireQR(t, sym, err, uri, "the SVG")
		require.Equal(t, qrscan.QuietZone, sym.Quiet, "exactly the standard's quiet zone: the page adds no margin of its own")
		modules, err := qrscan.SVGModules(svg)
		require.NoError(t, err)
		n := len(modules)
		require.Equal(t, sym.Size+2*qrscan.QuietZone, n)
		require.Contains(t, string(svg), fmt.Sprintf(`viewBox="0 0 %d %d"`, n, n))
		require.Contains(t, string(svg), fmt.Sprintf(`width="%d" height="%d"`, 8*n, 8*n), "8 px per module by default")

		// The same modules as the PNG.
		b, err := invoice.QRPNG(uri, n*6)
		require.NoError(t, err)
		img, err := png.Decode(bytes.NewReader(b))
		require.NoError(t, err)
		for y := range n {
			for x := range n {
				require.Equal(t, modules[y][x], dark(img.At(x*6+3, y*6+3)), "module (%d,%d)", x, y)
			}
		}
		// As a browser paints it at its natural size, for a scanner.
		files, want = append(files, qrscan.PGM(qrscan.Raster(modules, 8))), append(want, uri)
	}
	for i, got := range qrscan.Zbar(t, files...) {
		require.Equal(t, []string{want[i]}, got, "ZBar scans SVG %d", i)
	}
}

func TestQRPNG_RejectsSizeOutOfRange(t *testing.T) {
	t.Parallel()
	uri := testURIs(t)[0]
	for _, size := range []int{-5, 0, 20, 4097} {
		_, err := invoice.QRPNG(uri, size)
		require.ErrorIs(t, err, invoice.ErrQR, "size %d", size)
	}
}

func TestQR_RejectsContentTooLongToEncode(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 4000)
	_, err := invoice.QRPNG(long, 1000)
	require.ErrorIs(t, err, invoice.ErrQR)
	_, err = invoice.QRSVG(long)
	require.ErrorIs(t, err, invoice.ErrQR)
}

func dark(c color.Color) bool {
	r, g, b, _ := c.RGBA()
	return r+g+b < 3*0x8000
}

func requireWellFormedXML(t *testing.T, b []byte) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(b))
	for {
		_, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return
		}
		require.NoError(t, err)
	}
}

func ExampleQRSVG() {
	uri, _ := invoice.FormatPaymentURI(invoice.PaymentURI{
		Address: common.HexToAddress("0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"),
		ChainID: 9000,
		Value:   uint256.NewInt(1e18),
	})
	svg, err := invoice.QRSVG(uri)
	fmt.Println(err, bytes.HasPrefix(svg, []byte("<svg ")))
	img, err := invoice.QRPNG(uri, 256)
	fmt.Println(err, bytes.HasPrefix(img, []byte("\x89PNG")))
	// Output:
	// <nil> true
	// <nil> true
}
