package invoice

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	_ "image/jpeg" // the decoders a logo is checked with
	_ "image/png"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/httpapi"
	"github.com/evmpay/evmpay/store/problem"
)

// Branding: the merchant's accent colour and logo on the hosted checkout
// page (docs/checkout.md). The merchant sets them with PUT
// /v1/merchant/branding; the page reads them once, by lookup token, from
// GET /v1/public/invoice/branding and …/logo, so that the service serves
// the logo itself (the page's CSP allows images from its own origin only)
// and the public read that the page polls costs no extra query.

// Logo limits. A logo is shown at most 48 px high; 32 KiB of PNG or JPEG
// is plenty for that and keeps the page light.
const (
	maxLogoBytes = 32 << 10
	maxLogoSide  = 1024
)

// logoTypes are the image types accepted as logos: raster images only. SVG
// is refused outright (it can carry script), and so is anything whose bytes
// are not the type it claims.
var logoTypes = map[string]string{"image/png": "png", "image/jpeg": "jpeg"}

var accentColorRe = regexp.MustCompile(`^#[0-9a-fA-F]{6}$`)

// brandingView is the merchant's branding as GET and PUT
// /v1/merchant/branding answer it.
type brandingView struct {
	AccentColor *string    `json:"accent_color"`
	Logo        *logoView  `json:"logo"`
	UpdatedAt   *time.Time `json:"updated_at"`
}

type logoView struct {
	ContentType string `json:"content_type"`
	Bytes       int    `json:"bytes"`
	SHA256      string `json:"sha256"`
	Width       int    `json:"width"`
	Height      int    `json:"height"`
	// URL is where a checkout page reads it (with the invoice's lookup
	// token as bearer).
	URL string `json:"url"`
}

func (s *Service) brandingView(b store.MerchantBranding) brandingView {
	var v brandingView
	if b.UpdatedAt.IsZero() {
		return v // never set
	}
	t := b.UpdatedAt.UTC()
	v.UpdatedAt = &t
	if b.AccentColor != "" {
		c := b.AccentColor
		v.AccentColor = &c
	}
	if b.Logo != nil {
		sum := sha256.Sum256(b.Logo)
		cfg, _, _ := image.DecodeConfig(bytes.NewReader(b.Logo))
		v.Logo = &logoView{ContentType: b.LogoContentType, Bytes: len(b.Logo), SHA256: hex.EncodeToString(sum[:]),
			Width: cfg.Width, Height: cfg.Height, URL: s.cfg.BaseURL + "/v1/public/invoice/logo"}
	}
	return v
}

// getBranding reads the merchant's branding; none is the zero value.
func (s *Service) getBranding(r *http.Request, merchantID int64) (store.MerchantBranding, error) {
	b, err := s.st.GetMerchantBranding(r.Context(), merchantID)
	if errors.Is(err, store.ErrNotFound) {
		return store.MerchantBranding{MerchantID: merchantID}, nil
	}
	return b, err
}

func (s *Service) handleGetBranding(w http.ResponseWriter, r *http.Request) {
	m, ok := s.merchant(w, r)
	if !ok {
		return
	}
	b, err := s.getBranding(r, m.ID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.brandingView(b))
}

// handlePutBranding replaces the merchant's branding: accent_color
// ("#rrggbb") and logo (a data: URL of a PNG or JPEG, base64); an absent or
// null member removes that part.
func (s *Service) handlePutBranding(w http.ResponseWriter, r *http.Request) {
	m, ok := s.merchant(w, r)
	if !ok {
		return
	}
	if !httpapi.CheckJSON(w, r) {
		return
	}
	body, perr := readBody(w, r, s.cfg.MaxBodyBytes)
	if perr != nil {
		problem.Write(w, perr)
		return
	}
	b, perr := parseBranding(body)
	if perr != nil {
		problem.Write(w, perr)
		return
	}
	b.MerchantID, b.UpdatedAt = m.ID, s.cfg.Now().UTC().Truncate(time.Microsecond)
	if err := s.st.PutMerchantBranding(r.Context(), b); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.brandingView(b))
}

// parseBranding validates a PUT /v1/merchant/branding body.
func parseBranding(body []byte) (store.MerchantBranding, *problem.Problem) {
	ms, perr := members(body, "accent_color", "logo")
	if perr != nil {
		return store.MerchantBranding{}, perr
	}
	var b store.MerchantBranding
	if !isNull(ms["accent_color"]) {
		c, perr := stringMember(ms, "accent_color", 16)
		if perr != nil {
			return b, perr
		}
		if !accentColorRe.MatchString(c) {
			return b, problem.OfField(problem.CodeInvalidField, "accent_color", `accent_color must be a colour "#rrggbb", e.g. "#1a7f37"`)
		}
		b.AccentColor = strings.ToLower(c)
	}
	if !isNull(ms["logo"]) {
		var s string
		if raw := ms["logo"]; raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
			return b, problem.OfField(problem.CodeInvalidField, "logo", "logo must be a string: a data: URL, data:image/png;base64,…")
		}
		logo, ctype, perr := parseLogo(s)
		if perr != nil {
			return b, perr
		}
		b.Logo, b.LogoContentType = logo, ctype
	}
	return b, nil
}

// parseLogo decodes a data:image/png;base64,… URL and checks that its
// bytes are a whole image of the type it claims, within the limits.
func parseLogo(dataURL string) ([]byte, string, *problem.Problem) {
	bad := func(detail string) ([]byte, string, *problem.Problem) {
		return nil, "", problem.OfField(problem.CodeInvalidLogo, "logo", detail)
	}
	head, data, ok := strings.Cut(dataURL, ",")
	rest, isData := strings.CutPrefix(head, "data:")
	ctype, isBase64 := strings.CutSuffix(rest, ";base64")
	if !ok || !isData || !isBase64 {
		return bad("logo must be a data: URL with base64 content: data:image/png;base64,…")
	}
	ctype = strings.ToLower(ctype)
	format, accepted := logoTypes[ctype]
	if !accepted {
		return bad(fmt.Sprintf("a logo must be image/png or image/jpeg, not %q (SVG is refused: it can carry script)", truncate(ctype, 64)))
	}
	raw, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return bad("logo's content is not valid base64")
	}
	if len(raw) > maxLogoBytes {
		return bad(fmt.Sprintf("a logo must be at most %d bytes; this one has %d", maxLogoBytes, len(raw)))
	}
	// What the bytes are, not what the URL says: a browser told nosniff
	// trusts our Content-Type, so it must be true.
	if sniffed := http.DetectContentType(raw); sniffed != ctype {
		return bad(fmt.Sprintf("the logo's bytes are %s, not the %s its data: URL claims", sniffed, ctype))
	}
	cfg, got, err := image.DecodeConfig(bytes.NewReader(raw))
	if err != nil || got != format {
		return bad("the logo is not a readable " + ctype + " image")
	}
	if cfg.Width < 1 || cfg.Height < 1 || cfg.Width > maxLogoSide || cfg.Height > maxLogoSide {
		return bad(fmt.Sprintf("a logo must be at most %d×%d pixels; this one is %d×%d", maxLogoSide, maxLogoSide, cfg.Width, cfg.Height))
	}
	if _, _, err := image.Decode(bytes.NewReader(raw)); err != nil {
		return bad("the logo is not a whole " + ctype + " image")
	}
	return raw, ctype, nil
}

// publicBranding is what a payer's page reads of the merchant's branding.
type publicBranding struct {
	AccentColor string `json:"accent_color,omitempty"`
	LogoURL     string `json:"logo_url,omitempty"`
}

func (s *Service) handlePublicBranding(w http.ResponseWriter, r *http.Request) {
	inv, ok := s.lookupInvoice(w, r)
	if !ok {
		return
	}
	b, err := s.getBranding(r, inv.MerchantID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := publicBranding{AccentColor: b.AccentColor}
	if b.Logo != nil {
		out.LogoURL = s.cfg.BaseURL + "/v1/public/invoice/logo"
	}
	w.Header().Set("Cache-Control", "private, max-age=60")
	writeJSON(w, http.StatusOK, out)
}

// handlePublicLogo serves the merchant's logo to the holder of one of its
// invoices' lookup tokens, with the type checked at upload and nosniff; the
// policy header keeps the image inert even if opened on its own.
func (s *Service) handlePublicLogo(w http.ResponseWriter, r *http.Request) {
	inv, ok := s.lookupInvoice(w, r)
	if !ok {
		return
	}
	b, err := s.getBranding(r, inv.MerchantID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if b.Logo == nil {
		problem.Write(w, errNotFound)
		return
	}
	h := w.Header()
	h.Set("Content-Type", b.LogoContentType)
	h.Set("Content-Length", strconv.Itoa(len(b.Logo)))
	h.Set("Cache-Control", "private, max-age=60")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(b.Logo)
	}
}
