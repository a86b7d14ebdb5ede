package dashboard

import (
	"encoding/base64"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/evmpay/evmpay/store/problem"
)

// Branding: the checkout page's accent colour and logo, with a live
// preview of the payer's card (the colour applied as the checkout does,
// through the CSSOM; a picked logo shown from a blob: URL).

const maxLogoUpload = 64 << 10

func (d *Dashboard) handleBranding(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r)
	b, err := d.api.Branding(r.Context(), s.Principal.Merchant.ID)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.show(w, r, "branding", "branding", map[string]any{"B": b, "Name": s.Principal.Merchant.Name,
		"Color": cmpOr(b.AccentColor, "#0a58ca"), "Native": d.assetOf(nil).Symbol})
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// handleBrandingLogo serves the merchant's logo to the preview, with the
// type the API checked and nosniff.
func (d *Dashboard) handleBrandingLogo(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r)
	b, err := d.api.Branding(r.Context(), s.Principal.Merchant.ID)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	if b.Logo == nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", b.LogoContentType)
	w.Header().Set("Content-Security-Policy", "default-src 'none'; sandbox")
	_, _ = w.Write(b.Logo)
}

func (d *Dashboard) handlePutBranding(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r)
	r.Body = http.MaxBytesReader(w, r.Body, maxLogoUpload+8<<10)
	if err := r.ParseMultipartForm(maxLogoUpload + 8<<10); err != nil {
		d.fail(w, r, problem.OfField(problem.CodeInvalidLogo, "logo", "the logo must be a PNG or JPEG of at most 32 KiB"))
		return
	}
	cur, err := d.api.Branding(r.Context(), s.Principal.Merchant.ID)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	logo := ""
	if cur.Logo != nil && r.PostFormValue("remove_logo") != "on" {
		logo = "data:" + cur.LogoContentType + ";base64," + base64.StdEncoding.EncodeToString(cur.Logo)
	}
	if f, hdr, err := r.FormFile("logo"); err == nil {
		defer f.Close()
		raw, err := io.ReadAll(io.LimitReader(f, maxLogoUpload+1))
		if err != nil || len(raw) > maxLogoUpload {
			d.fail(w, r, problem.OfField(problem.CodeInvalidLogo, "logo", "the logo must be a PNG or JPEG of at most 32 KiB"))
			return
		}
		ct := hdr.Header.Get("Content-Type")
		if !strings.HasPrefix(ct, "image/") {
			ct = http.DetectContentType(raw)
		}
		logo = "data:" + ct + ";base64," + base64.StdEncoding.EncodeToString(raw)
	}
	color := strings.ToLower(strings.TrimSpace(r.PostFormValue("accent_color")))
	if r.PostFormValue("default_color") == "on" {
		color = ""
	}
	b, err := d.api.PutBranding(r.Context(), s.Principal, color, logo)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.auditAs(r.Context(), s, "branding.update", "merchant "+strconv.FormatInt(s.Principal.Merchant.ID, 10),
		"accent "+cmpOr(b.AccentColor, "default")+", logo "+map[bool]string{true: "set", false: "none"}[b.Logo != nil])
	d.redirect(w, r, "/branding", "saved")
}
