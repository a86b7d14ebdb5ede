// Package qrscan reads back, in tests, the QR codes evmpay draws
// (invoice.QRPNG and invoice.QRSVG, and the checkout page showing them),
// with two decoders that share no code:
//
//   - Read, ReadPNG and ReadSVG read the module grid itself — from the
//     pixels of an image whose modules are whole, equal squares (as QRPNG
//     draws them and a browser paints the SVG at its natural size), or from
//     the SVG's own XML — and decode that grid with gozxing's QR decoder
//     (format information, Reed–Solomon correction, data segments). There
//     is no detection step: nothing depends on where a scanner's finder
//     pattern search happens to lock on, so the result depends only on the
//     image. They also measure the quiet zone.
//   - Zbar scans images as a camera scanner would, with zbarimg (Debian's
//     zbar-tools, which scripts/test.sh installs): ZBar finds the symbol in
//     the pixels on its own.
//
// gozxing's own detector (its QRCodeReader without the PURE_BARCODE hint)
// is not used: on perfect synthetic images it locks on a data pattern that
// looks like a finder pattern for about 1 URI in 75 (NotFoundException:
// "dimension = 31"), so a test decoding with it failed or passed with the
// random deposit address a run got.
//
// The package imports nothing of evmpay, so that every package's tests may
// use it; like the rest of the kit it is test-only.
package qrscan

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/makiuchi-d/gozxing/qrcode/decoder"
)

// QuietZone is the light margin the QR standard (ISO/IEC 18004) requires
// on every side of a symbol, in modules.
const QuietZone = 4

// Symbol is a QR code read back from an image.
type Symbol struct {
	// Text is the decoded content.
	Text string
	// Level is the error-correction level: "L", "M", "Q" or "H".
	Level string
	// Corrected is how many codewords Reed–Solomon had to correct: 0 for
	// a grid read exactly.
	Corrected int
	// Size is the symbol's width in modules, quiet zone excluded (21 for
	// version 1, 4 more per version).
	Size int
	// ModulePixels is the side of one module in pixels (1 for a grid read
	// from an SVG's XML).
	ModulePixels int
	// Quiet is the narrowest light margin between the symbol and the
	// image's edge, in whole modules.
	Quiet int
}

// Read reads the QR code of img: a dark symbol on a light background,
// axis-aligned, every module a square of the same whole number of pixels.
// Pixels darker than mid-grey (after alpha over white) are dark.
func Read(img image.Image) (Symbol, error) {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	dark := make([][]bool, h)
	for y := range h {
		dark[y] = make([]bool, w)
	}
	switch m := img.(type) {
	case *image.Paletted: // what invoice.QRPNG draws, as png.Decode reads it
		palette := make([]bool, len(m.Palette))
		for i, c := range m.Palette {
			palette[i] = isDark(c)
		}
		for y := range h {
			row := m.Pix[m.PixOffset(b.Min.X, b.Min.Y+y):][:w]
			for x, i := range row {
				dark[y][x] = palette[i]
			}
		}
	case *image.Gray:
		for y := range h {
			row := m.Pix[m.PixOffset(b.Min.X, b.Min.Y+y):][:w]
			for x, v := range row {
				dark[y][x] = v < 0x80
			}
		}
	default:
		for y := range h {
			for x := range w {
				dark[y][x] = isDark(img.At(b.Min.X+x, b.Min.Y+y))
			}
		}
	}
	return readGrid(dark)
}

// ReadPNG is Read for a PNG file's bytes.
func ReadPNG(b []byte) (Symbol, error) {
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		return Symbol{}, fmt.Errorf("qrscan: %w", err)
	}
	return Read(img)
}

// ReadSVG reads the QR code of an SVG from its XML (SVGModules): one
// module per viewBox unit.
func ReadSVG(svg []byte) (Symbol, error) {
	m, err := SVGModules(svg)
	if err != nil {
		return Symbol{}, err
	}
	return ReadModules(m)
}

// ReadModules reads the QR code of a module grid (dark = true), quiet zone
// included, as SVGModules returns it.
func ReadModules(modules [][]bool) (Symbol, error) {
	return readGrid(modules)
}

func isDark(c color.Color) bool {
	r, g, b, a := c.RGBA()
	// Over white: a transparent pixel is light.
	white := 0xffff - a
	return (r+white)+(g+white)+(b+white) < 3*0x8000
}

// readGrid finds the symbol in a grid of dark cells (pixels, or modules
// for an SVG), samples its modules and decodes them.
func readGrid(dark [][]bool) (Symbol, error) {
	h := len(dark)
	if h == 0 || len(dark[0]) == 0 {
		return Symbol{}, errors.New("qrscan: empty image")
	}
	w := len(dark[0])
	x0, y0, x1, y1 := w, h, -1, -1
	for y, row := range dark {
		for x, d := range row {
			if d {
				x0, y0, x1, y1 = min(x0, x), min(y0, y), max(x1, x), max(y1, y)
			}
		}
	}
	if x1 < 0 {
		return Symbol{}, errors.New("qrscan: no dark pixel: no QR code")
	}
	// The top-left module is the corner of a finder pattern, whose top
	// edge is a run of 7 dark modules.
	run := 0
	for x := x0; x <= x1 && dark[y0][x]; x++ {
		run++
	}
	if run%7 != 0 {
		return Symbol{}, fmt.Errorf("qrscan: the top-left finder pattern is %d pixels wide, not 7 whole modules", run)
	}
	p := run / 7
	sw, sh := x1-x0+1, y1-y0+1
	if sw != sh || sw%p != 0 {
		return Symbol{}, fmt.Errorf("qrscan: the symbol is %d×%d pixels, not a square of whole %d-pixel modules", sw, sh, p)
	}
	n := sw / p
	if n < 21 || (n-17)%4 != 0 {
		return Symbol{}, fmt.Errorf("qrscan: %d modules per side is no QR version", n)
	}
	modules := make([][]bool, n)
	for my := range n {
		modules[my] = make([]bool, n)
		for mx := range n {
			v := dark[y0+my*p][x0+mx*p]
			// Every pixel of a module is the module's colour.
			for dy := range p {
				for dx := range p {
					if dark[y0+my*p+dy][x0+mx*p+dx] != v {
						return Symbol{}, fmt.Errorf("qrscan: module (%d,%d) is not one colour: not a grid of whole %d-pixel modules", mx, my, p)
					}
				}
			}
			modules[my][mx] = v
		}
	}
	quiet := min(x0, y0, w-1-x1, h-1-y1) / p
	res, err := decoder.NewDecoder().DecodeBoolMap(modules, nil)
	if err != nil {
		return Symbol{}, fmt.Errorf("qrscan: decode the %d×%d modules: %w", n, n, err)
	}
	return Symbol{Text: res.GetText(), Level: res.GetECLevel(), Corrected: res.GetErrorsCorrected(),
		Size: n, ModulePixels: p, Quiet: quiet}, nil
}

// SVGModules reads the modules an SVG QR code draws, parsed with
// encoding/xml: the grid is the viewBox (one module per unit, quiet zone
// included), and a module is dark when a dark shape covers it. It knows the
// shapes of a module drawing: <rect> elements, and <path> elements made of
// axis-aligned rectangles (M, then H/h and V/v segments, then Z/z), as
// invoice.QRSVG writes them; a shape's fill is #000/#fff, black/white or
// none (a rect with no fill is black, as in SVG). Anything else is an
// error, so that a change of drawing is noticed.
func SVGModules(svg []byte) ([][]bool, error) {
	dec := xml.NewDecoder(bytes.NewReader(svg))
	var grid [][]bool
	var n int
	paint := func(x, y, w, h float64, dark bool) error {
		if x != float64(int(x)) || y != float64(int(y)) || w != float64(int(w)) || h != float64(int(h)) || w < 0 || h < 0 ||
			x < 0 || y < 0 || int(x+w) > n || int(y+h) > n {
			return fmt.Errorf("qrscan: svg: shape (%g,%g) %g×%g is not whole modules inside the %d×%d viewBox", x, y, w, h, n, n)
		}
		for j := int(y); j < int(y+h); j++ {
			for i := int(x); i < int(x+w); i++ {
				grid[j][i] = dark
			}
		}
		return nil
	}
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("qrscan: svg: %w", err)
		}
		el, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		attr := map[string]string{}
		for _, a := range el.Attr {
			attr[a.Name.Local] = a.Value
		}
		switch el.Name.Local {
		case "svg":
			f := strings.Fields(attr["viewBox"])
			if len(f) != 4 || f[0] != "0" || f[1] != "0" || f[2] != f[3] {
				return nil, fmt.Errorf("qrscan: svg: viewBox %q is not a square from 0 0", attr["viewBox"])
			}
			if n, err = strconv.Atoi(f[2]); err != nil || n <= 0 {
				return nil, fmt.Errorf("qrscan: svg: viewBox %q", attr["viewBox"])
			}
			grid = make([][]bool, n)
			for i := range grid {
				grid[i] = make([]bool, n)
			}
		case "rect":
			if grid == nil {
				return nil, errors.New("qrscan: svg: a shape before the <svg> element")
			}
			dark, draw, err := fill(attr["fill"], true)
			if err != nil {
				return nil, err
			}
			v := map[string]float64{"x": 0, "y": 0}
			for _, k := range []string{"x", "y", "width", "height"} {
				s, ok := attr[k]
				if !ok && (k == "x" || k == "y") {
					continue
				}
				if v[k], err = strconv.ParseFloat(s, 64); err != nil {
					return nil, fmt.Errorf("qrscan: svg: rect %s=%q", k, s)
				}
			}
			if draw {
				if err := paint(v["x"], v["y"], v["width"], v["height"], dark); err != nil {
					return nil, err
				}
			}
		case "path":
			if grid == nil {
				return nil, errors.New("qrscan: svg: a shape before the <svg> element")
			}
			dark, draw, err := fill(attr["fill"], true)
			if err != nil {
				return nil, err
			}
			rects, err := pathRects(attr["d"])
			if err != nil {
				return nil, err
			}
			for _, r := range rects {
				if draw {
					if err := paint(r[0], r[1], r[2], r[3], dark); err != nil {
						return nil, err
					}
				}
			}
		case "g", "title", "desc":
		default:
			return nil, fmt.Errorf("qrscan: svg: unexpected element <%s>", el.Name.Local)
		}
	}
	if grid == nil {
		return nil, errors.New("qrscan: svg: no <svg> element")
	}
	return grid, nil
}

// fill reads a fill attribute: whether it is dark, and whether it paints.
func fill(f string, def bool) (dark, draw bool, err error) {
	switch strings.ToLower(f) {
	case "":
		return def, true, nil
	case "#000", "#000000", "black":
		return true, true, nil
	case "#fff", "#ffffff", "white":
		return false, true, nil
	case "none":
		return false, false, nil
	}
	return false, false, fmt.Errorf("qrscan: svg: fill %q is neither black nor white", f)
}

// pathRects reads path data made of closed axis-aligned rectangles:
// "M x y" then four h/v (or H/V) segments, then z.
func pathRects(d string) ([][4]float64, error) {
	toks := tokenize(d)
	var out [][4]float64
	for i := 0; i < len(toks); {
		if toks[i] != "M" || i+2 >= len(toks) {
			return nil, fmt.Errorf("qrscan: svg: path data %.40q: expected M x y", strings.Join(toks[i:], " "))
		}
		x, err1 := strconv.ParseFloat(toks[i+1], 64)
		y, err2 := strconv.ParseFloat(toks[i+2], 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("qrscan: svg: path data: bad point %q %q", toks[i+1], toks[i+2])
		}
		i += 3
		cx, cy := x, y
		minX, minY, maxX, maxY := x, y, x, y
		segs := 0
		for i < len(toks) && toks[i] != "z" && toks[i] != "Z" {
			cmd := toks[i]
			if i+1 >= len(toks) {
				return nil, errors.New("qrscan: svg: path data ends inside a segment")
			}
			v, err := strconv.ParseFloat(toks[i+1], 64)
			if err != nil {
				return nil, fmt.Errorf("qrscan: svg: path data: bad number %q", toks[i+1])
			}
			switch cmd {
			case "h":
				cx += v
			case "H":
				cx = v
			case "v":
				cy += v
			case "V":
				cy = v
			default:
				return nil, fmt.Errorf("qrscan: svg: path command %q is not a rectangle's edge", cmd)
			}
			minX, minY, maxX, maxY = min(minX, cx), min(minY, cy), max(maxX, cx), max(maxY, cy)
			segs++
			i += 2
		}
		if i >= len(toks) {
			return nil, errors.New("qrscan: svg: path not closed with z")
		}
		i++ // z
		// Three edges and the closing z, or four edges back to the start.
		if (segs != 3 && segs != 4) || (segs == 4 && (cx != x || cy != y)) {
			return nil, fmt.Errorf("qrscan: svg: sub-path at (%g,%g) is not a rectangle", x, y)
		}
		out = append(out, [4]float64{minX, minY, maxX - minX, maxY - minY})
	}
	return out, nil
}

// tokenize splits path data into commands and numbers.
func tokenize(d string) []string {
	var toks []string
	cur := strings.Builder{}
	flush := func() {
		if cur.Len() > 0 {
			toks = append(toks, cur.String())
			cur.Reset()
		}
	}
	for _, r := range d {
		switch {
		case strings.ContainsRune("MmHhVvZzLl", r):
			flush()
			toks = append(toks, string(r))
		case r == ' ' || r == ',' || r == '\n' || r == '\t':
			flush()
		case r == '-' && cur.Len() > 0:
			flush()
			cur.WriteRune(r)
		default:
			cur.WriteRune(r)
		}
	}
	flush()
	return toks
}

// Raster draws a module grid (dark = true) as a black-on-white image of
// scale×scale pixels per module, for a scanner.
func Raster(modules [][]bool, scale int) *image.Gray {
	n := len(modules)
	img := image.NewGray(image.Rect(0, 0, n*scale, n*scale))
	for i := range img.Pix {
		img.Pix[i] = 0xff
	}
	for y, row := range modules {
		for x, d := range row {
			if !d {
				continue
			}
			for dy := range scale {
				off := img.PixOffset(x*scale, y*scale+dy)
				for dx := range scale {
					img.Pix[off+dx] = 0
				}
			}
		}
	}
	return img
}

// TB is the part of testing.TB that Zbar uses.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	TempDir() string
}

// PGM encodes a grey image as a binary PGM file (netpbm P5), for Zbar: no
// compression to spend time on.
func PGM(img *image.Gray) []byte {
	b := img.Bounds()
	out := fmt.Appendf(nil, "P5\n%d %d\n255\n", b.Dx(), b.Dy())
	for y := b.Min.Y; y < b.Max.Y; y++ {
		out = append(out, img.Pix[img.PixOffset(b.Min.X, y):][:b.Dx()]...)
	}
	return out
}

// Zbar scans each image file (PNG, or PGM) with zbarimg and returns, for each, the text of
// every QR code ZBar found in it, in order (none when it found none). The
// files are scanned in batches, as many zbarimg processes at once as the
// machine has cores. The test fails when zbarimg is missing
// (scripts/test.sh installs Debian's zbar-tools) or cannot run.
func Zbar(tb TB, files ...[]byte) [][]string {
	tb.Helper()
	bin, err := exec.LookPath("zbarimg")
	if err != nil {
		tb.Fatalf("qrscan: the QR tests need zbarimg: scripts/test.sh installs it (apt-get install zbar-tools)")
		return nil
	}
	dir := tb.TempDir()
	names := make([]string, len(files))
	index := map[string]int{}
	for i, b := range files {
		ext := ".png"
		if bytes.HasPrefix(b, []byte("P5")) {
			ext = ".pgm"
		}
		names[i] = filepath.Join(dir, fmt.Sprintf("qr-%06d%s", i, ext))
		index[names[i]] = i
		if err := os.WriteFile(names[i], b, 0o600); err != nil {
			tb.Fatalf("qrscan: %v", err)
		}
	}
	type result struct {
		out []byte
		err error
	}
	// Batches keep command lines short and use every core.
	batch := min(500, max(1, (len(names)+runtime.NumCPU()-1)/runtime.NumCPU()))
	var results []chan result
	for lo := 0; lo < len(names); lo += batch {
		c := make(chan result, 1)
		results = append(results, c)
		args := append([]string{"--xml", "-q", "--nodbus", "-Sdisable", "-Sqrcode.enable"}, names[lo:min(lo+batch, len(names))]...)
		go func() {
			cmd := exec.Command(bin, args...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			// zbarimg exits 4 when some image held no barcode: that is
			// an answer, read from the XML.
			var ee *exec.ExitError
			if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 4) {
				err = fmt.Errorf("%w: %s", err, stderr.String())
			} else {
				err = nil
			}
			c <- result{out, err}
		}()
	}
	out := make([][]string, len(files))
	for _, c := range results {
		r := <-c
		if r.err != nil {
			tb.Fatalf("qrscan: zbarimg: %v", r.err)
		}
		var doc struct {
			Sources []struct {
				Href    string `xml:"href,attr"`
				Symbols []struct {
					Type string `xml:"type,attr"`
					Data string `xml:"data"`
				} `xml:"index>symbol"`
			} `xml:"source"`
		}
		if err := xml.Unmarshal(r.out, &doc); err != nil {
			tb.Fatalf("qrscan: zbarimg's XML: %v\n%s", err, r.out)
		}
		for _, s := range doc.Sources {
			i, ok := index[s.Href]
			if !ok {
				tb.Fatalf("qrscan: zbarimg reported an unknown file %q", s.Href)
			}
			for _, sym := range s.Symbols {
				if sym.Type == "QR-Code" {
					out[i] = append(out[i], sym.Data)
				}
			}
		}
	}
	return out
}
