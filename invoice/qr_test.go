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
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/holiman/uint256"
	"github.com/makiuchi-d/gozxing"
	zxqr "github.com/makiuchi-d/gozxing/qrcode"
	"github.com/stretchr/testify/require"

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

// decodeQR reads a QR code from img with gozxing, an implementation
// independent of the encoder, the way a scanner would (no hints).
func decodeQR(t *testing.T, img image.Image) *gozxing.Result {
	t.Helper()
	bmp, err := gozxing.NewBinaryBitmapFromImage(img)
	require.NoError(t, err)
	res, err := zxqr.NewQRCodeReader().Decode(bmp, nil)
	require.NoError(t, err)
	return res
}

func TestQRPNG_DecodesBackToTheURI(t *testing.T) {
	t.Parallel()
	for _, uri := range testURIs(t) {
		for _, size := range []int{200, 256, 512} {
			b, err := invoice.QRPNG(uri, size)
			require.NoError(t, err)
			img, err := png.Decode(bytes.NewReader(b))
			require.NoError(t, err)
			require.Equal(t, image.Rect(0, 0, size, size), img.Bounds())

			res := decodeQR(t, img)
			require.Equal(t, uri, res.GetText(), "size %d", size)
			require.Equal(t, gozxing.BarcodeFormat_QR_CODE, res.GetBarcodeFormat())
			require.Equal(t, "M", fmt.Sprint(res.GetResultMetadata()[gozxing.ResultMetadataType_ERROR_CORRECTION_LEVEL]))
		}
	}
}

func TestQRPNG_QuietZoneOfAtLeastFourModules(t *testing.T) {
	t.Parallel()
	uri := testURIs(t)[0]
	svg, err := invoice.QRSVG(uri)
	require.NoError(t, err)
	modules := svgBitmap(t, svg)
	n := len(modules) // quiet zone included
	size := 512
	b, err := invoice.QRPNG(uri, size)
	require.NoError(t, err)
	img, err := png.Decode(bytes.NewReader(b))
	require.NoError(t, err)

	minX, minY, maxX, maxY := size, size, -1, -1
	for y := range size {
		for x := range size {
			if dark(img.At(x, y)) {
				minX, minY, maxX, maxY = min(minX, x), min(minY, y), max(maxX, x), max(maxY, y)
			}
		}
	}
	scale := size / n
	quiet := 4 * scale
	require.GreaterOrEqual(t, minX, quiet)
	require.GreaterOrEqual(t, minY, quiet)
	require.GreaterOrEqual(t, size-1-maxX, quiet)
	require.GreaterOrEqual(t, size-1-maxY, quiet)
	// Every module is exactly scale × scale pixels: the PNG matches the
	// module grid.
	offset := (size - scale*n) / 2
	for y := range n {
		for x := range n {
			for _, d := range [][2]int{{0, 0}, {scale - 1, 0}, {0, scale - 1}, {scale - 1, scale - 1}} {
				px := img.At(offset+x*scale+d[0], offset+y*scale+d[1])
				require.Equal(t, modules[y][x], dark(px), "module (%d,%d)", x, y)
			}
		}
	}
}

func TestQRSVG_SameModulesAndDecodesBackToTheURI(t *testing.T) {
	t.Parallel()
	for _, uri := range testURIs(t) {
		svg, err := invoice.QRSVG(uri)
		require.NoError(t, err)
		requireWellFormedXML(t, svg)
		require.Contains(t, string(svg), `shape-rendering="crispEdges"`)
		require.Equal(t, 1, strings.Count(string(svg), "<path"), "one path")

		modules := svgBitmap(t, svg)
		n := len(modules)
		require.Contains(t, string(svg), fmt.Sprintf(`viewBox="0 0 %d %d"`, n, n))
		// Quiet zone: the outer four rows and columns are light.
		for i := range n {
			for q := range 4 {
				require.False(t, modules[q][i] || modules[n-1-q][i] || modules[i][q] || modules[i][n-1-q], "quiet zone at %d", i)
			}
		}
		// Rasterise the path at 6 px per module and scan it.
		const scale = 6
		img := image.NewGray(image.Rect(0, 0, n*scale, n*scale))
		for y := range n * scale {
			for x := range n * scale {
				c := uint8(255)
				if modules[y/scale][x/scale] {
					c = 0
				}
				img.SetGray(x, y, color.Gray{Y: c})
			}
		}
		require.Equal(t, uri, decodeQR(t, img).GetText())
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

var svgRun = regexp.MustCompile(`^M(\d+) (\d+)h(\d+)v1h-(\d+)z`)

// svgBitmap reads back the modules QRSVG drew: the viewBox size and the
// runs of the single path.
func svgBitmap(t *testing.T, svg []byte) [][]bool {
	t.Helper()
	m := regexp.MustCompile(`viewBox="0 0 (\d+) (\d+)"`).FindSubmatch(svg)
	require.NotNil(t, m)
	n, err := strconv.Atoi(string(m[1]))
	require.NoError(t, err)
	bitmap := make([][]bool, n)
	for i := range bitmap {
		bitmap[i] = make([]bool, n)
	}
	d := regexp.MustCompile(`<path fill="#000" d="([^"]*)"`).FindSubmatch(svg)
	require.NotNil(t, d)
	rest := string(d[1])
	for rest != "" {
		r := svgRun.FindStringSubmatch(rest)
		require.NotNil(t, r, "unexpected path data %.40q", rest)
		x, _ := strconv.Atoi(r[1])
		y, _ := strconv.Atoi(r[2])
		w, _ := strconv.Atoi(r[3])
		require.Equal(t, r[3], r[4])
		for i := x; i < x+w; i++ {
			require.False(t, bitmap[y][i], "overlapping runs")
			bitmap[y][i] = true
		}
		rest = rest[len(r[0]):]
	}
	return bitmap
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
