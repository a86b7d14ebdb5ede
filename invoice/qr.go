package invoice

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"strconv"

	qrcode "github.com/skip2/go-qrcode"
)

// QR codes use error-correction level M (about 15% of the symbol can be
// damaged or covered) and a quiet zone of 4 modules, the minimum the QR
// standard requires and what phone wallets expect.
const (
	qrLevel     = qrcode.Medium
	qrQuietZone = 4 // modules; go-qrcode's Bitmap always includes it

	// svgModulePixels is the SVG's default display size per module; the
	// SVG scales freely (CSS width/height override it).
	svgModulePixels = 8
	// maxQRPNGSize bounds QRPNG's size argument (pixels per side).
	maxQRPNGSize = 4096
)

// ErrQR wraps QR code failures: content too long to encode, or a PNG size
// outside what the symbol needs.
var ErrQR = errors.New("invoice: QR code")

// qrBitmap encodes content and returns its modules, quiet zone included:
// bitmap[y][x] is true for a dark module.
func qrBitmap(content string) ([][]bool, error) {
	q, err := qrcode.New(content, qrLevel)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrQR, err)
	}
	q.DisableBorder = false
	return q.Bitmap(), nil
}

// QRPNG draws uri (normally from FormatPaymentURI) as a black-on-white QR
// code PNG of exactly size×size pixels. Every module is the same whole
// number of pixels, size / modules, and the symbol is centred, so any pixels
// left over widen the quiet zone. size must be at least the module count
// (quiet zone included: 33 to 61 for payment URIs) and at most 4096; choose
// at least 4 pixels per module, e.g. 256 or more, for phone cameras.
func QRPNG(uri string, size int) ([]byte, error) {
	bitmap, err := qrBitmap(uri)
	if err != nil {
		return nil, err
	}
	n := len(bitmap)
	if size < n || size > maxQRPNGSize {
		return nil, fmt.Errorf("%w: size %d px out of range [%d, %d] for this content", ErrQR, size, n, maxQRPNGSize)
	}
	scale := size / n
	offset := (size - scale*n) / 2

	img := image.NewPaletted(image.Rect(0, 0, size, size), color.Palette{color.White, color.Black})
	for y, row := range bitmap {
		for x, dark := range row {
			if !dark {
				continue
			}
			for dy := 0; dy < scale; dy++ {
				start := img.PixOffset(offset+x*scale, offset+y*scale+dy)
				for dx := 0; dx < scale; dx++ {
					img.Pix[start+dx] = 1
				}
			}
		}
	}
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestCompression}
	if err := enc.Encode(&buf, img); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrQR, err)
	}
	return buf.Bytes(), nil
}

// QRSVG draws uri (normally from FormatPaymentURI) as a QR code SVG: a white
// background and one black path of whole modules in a viewBox of one unit
// per module (quiet zone included), rendered with crisp edges. Its default
// size is 8 px per module; it scales without loss.
func QRSVG(uri string) ([]byte, error) {
	bitmap, err := qrBitmap(uri)
	if err != nil {
		return nil, err
	}
	n := strconv.Itoa(len(bitmap))
	px := strconv.Itoa(len(bitmap) * svgModulePixels)

	var b bytes.Buffer
	b.WriteString(`<svg xmlns="http://www.w3.org/2000/svg" version="1.1" viewBox="0 0 ` + n + ` ` + n +
		`" width="` + px + `" height="` + px + `" shape-rendering="crispEdges">`)
	b.WriteString(`<rect width="` + n + `" height="` + n + `" fill="#fff"/>`)
	b.WriteString(`<path fill="#000" d="`)
	// One sub-path per horizontal run of dark modules.
	for y, row := range bitmap {
		for x := 0; x < len(row); {
			if !row[x] {
				x++
				continue
			}
			start := x
			for x < len(row) && row[x] {
				x++
			}
			run := strconv.Itoa(x - start)
			b.WriteString("M" + strconv.Itoa(start) + " " + strconv.Itoa(y) + "h" + run + "v1h-" + run + "z")
		}
	}
	b.WriteString(`"/></svg>`)
	b.WriteByte('\n')
	return b.Bytes(), nil
}
