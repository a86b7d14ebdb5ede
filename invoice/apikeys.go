package invoice

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/api"
	"github.com/evmpay/evmpay/store/httpapi"
	"github.com/evmpay/evmpay/store/problem"
)

// The merchant's scoped API keys and the controls on what the service sends
// out for it (payout settings): managed with the merchant's own key only,
// so that a scoped key can neither mint another nor loosen its own limits.

// apiKeyView is a scoped key; APIKey only in the response that creates it.
type apiKeyView struct {
	api.APIKey
	Key string `json:"api_key,omitempty"`
}

func (s *Service) handleCreateAPIKey(w http.ResponseWriter, r *http.Request) {
	p := principal(r)
	if !httpapi.CheckJSON(w, r) {
		return
	}
	body, perr := readBody(w, r, s.cfg.MaxBodyBytes)
	if perr != nil {
		problem.Write(w, perr)
		return
	}
	v, err := s.createAPIKeyFrom(r.Context(), p, body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Location", s.cfg.BaseURL+"/v1/merchant/api-keys/"+strconv.FormatInt(v.ID, 10))
	writeJSON(w, http.StatusCreated, v)
}

// createAPIKeyFrom validates a POST /v1/merchant/api-keys body and makes
// the key: the one path of the HTTP API and of CreateAPIKey.
func (s *Service) createAPIKeyFrom(ctx context.Context, p Principal, body []byte) (apiKeyView, error) {
	ms, perr := members(body, "name", "scopes")
	if perr != nil {
		return apiKeyView{}, perr
	}
	name, perr := textMember(ms, "name", 200, false)
	if perr != nil {
		return apiKeyView{}, perr
	}
	var scopes []string
	if raw := ms["scopes"]; isNull(raw) || json.Unmarshal(raw, &scopes) != nil || len(scopes) == 0 {
		return apiKeyView{}, problem.OfField(problem.CodeMissingField, "scopes", "scopes is a non-empty array of "+strings.Join(store.AllScopes(), ", "))
	}
	var set store.Scopes
	for _, sc := range scopes {
		if !slices.Contains(store.AllScopes(), sc) {
			return apiKeyView{}, problem.OfField(problem.CodeInvalidField, "scopes", "unknown scope "+strconv.Quote(sc)+" (scopes: "+strings.Join(store.AllScopes(), ", ")+")")
		}
		if !set.Has(sc) {
			set = append(set, sc)
		}
	}
	key, digest, hash, prefix, err := s.creds.newAPIKey()
	if err != nil {
		return apiKeyView{}, err
	}
	k := store.APIKey{MerchantID: p.Merchant.ID, Name: name, Digest: digest, Hash: hash, Prefix: prefix, Scopes: set, CreatedAt: s.now()}
	if err := s.st.CreateAPIKey(ctx, &k); err != nil {
		return apiKeyView{}, err
	}
	s.log.InfoContext(ctx, "api key created", slog.Int64("merchant_id", p.Merchant.ID), slog.Int64("key_id", k.ID),
		slog.String("scopes", strings.Join(set, ",")))
	return apiKeyView{APIKey: api.NewAPIKey(k), Key: key}, nil
}

func (s *Service) handleListAPIKeys(w http.ResponseWriter, r *http.Request) {
	ks, err := s.st.ListAPIKeys(r.Context(), principal(r).Merchant.ID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := struct {
		Data []api.APIKey `json:"data"`
	}{Data: make([]api.APIKey, 0, len(ks))}
	for _, k := range ks {
		out.Data = append(out.Data, api.NewAPIKey(k))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Service) handleRevokeAPIKey(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		problem.Write(w, errNotFound)
		return
	}
	k, err := s.revokeAPIKey(r.Context(), principal(r), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, k)
}

// revokeAPIKey revokes the merchant's key id (at once, in every replica).
func (s *Service) revokeAPIKey(ctx context.Context, p Principal, id int64) (api.APIKey, error) {
	k, err := s.st.RevokeAPIKey(ctx, p.Merchant.ID, id, s.now())
	if err != nil {
		return api.APIKey{}, err
	}
	s.auth.forget(k.Digest)
	s.log.InfoContext(ctx, "api key revoked", slog.Int64("merchant_id", p.Merchant.ID), slog.Int64("key_id", id))
	return api.NewAPIKey(k), nil
}

// payoutSettings is the JSON of a merchant's payout policy: per asset its
// approval threshold, daily limit and payout-wallet reserve in base units,
// the payout allowlist, and the merchant's own wallets that pay its
// merchant-paid requests.
type payoutSettings struct {
	Assets           []assetSettings         `json:"assets"`
	AllowlistEnabled bool                    `json:"allowlist_enabled"`
	Allowlist        []store.ChecksumAddress `json:"allowlist"`
	PayingWallets    []store.ChecksumAddress `json:"paying_wallets"`
	UpdatedAt        *time.Time              `json:"updated_at,omitempty"`
}

type assetSettings struct {
	// Asset is the asset's symbol (an unconfigured token's address).
	Asset             string        `json:"asset"`
	ApprovalThreshold *store.Amount `json:"approval_threshold,omitempty"`
	DailyLimit        *store.Amount `json:"daily_limit,omitempty"`
	Reserve           *store.Amount `json:"reserve,omitempty"`
}

func (s *Service) settingsJSON(p store.PayoutPolicy) payoutSettings {
	out := payoutSettings{Assets: []assetSettings{}, AllowlistEnabled: p.AllowlistEnabled,
		Allowlist: make([]store.ChecksumAddress, 0, len(p.Allowlist))}
	for _, ap := range p.Assets {
		a := api.AssetOf(ap.Token, s.homeChain().assets.list...)
		name := a.Symbol
		if name == "" && a.Address != nil {
			name = a.Address.Hex()
		}
		out.Assets = append(out.Assets, assetSettings{Asset: name, ApprovalThreshold: ap.ApprovalThreshold, DailyLimit: ap.DailyLimit,
			Reserve: ap.Reserve})
	}
	for _, a := range p.Allowlist {
		out.Allowlist = append(out.Allowlist, store.ChecksumAddress(a))
	}
	out.PayingWallets = make([]store.ChecksumAddress, 0, len(p.PayingWallets))
	for _, a := range p.PayingWallets {
		out.PayingWallets = append(out.PayingWallets, store.ChecksumAddress(a))
	}
	if !p.UpdatedAt.IsZero() {
		t := p.UpdatedAt.UTC()
		out.UpdatedAt = &t
	}
	return out
}

func (s *Service) handleGetPayoutSettings(w http.ResponseWriter, r *http.Request) {
	p, err := s.st.GetPayoutPolicy(r.Context(), principal(r).Merchant.ID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.settingsJSON(p))
}

// handlePutPayoutSettings replaces the merchant's payout settings.
func (s *Service) handlePutPayoutSettings(w http.ResponseWriter, r *http.Request) {
	if !httpapi.CheckJSON(w, r) {
		return
	}
	body, perr := readBody(w, r, s.cfg.MaxBodyBytes)
	if perr != nil {
		problem.Write(w, perr)
		return
	}
	v, err := s.putPayoutSettingsFrom(r.Context(), principal(r), body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// putPayoutSettingsFrom validates a PUT /v1/merchant/payout-settings body
// and stores it: the one path of the HTTP API and of PutPayoutSettings.
func (s *Service) putPayoutSettingsFrom(ctx context.Context, p Principal, body []byte) (payoutSettings, error) {
	m := p.Merchant
	ms, perr := members(body, "assets", "allowlist_enabled", "allowlist", "paying_wallets")
	if perr != nil {
		return payoutSettings{}, perr
	}
	policy := store.PayoutPolicy{MerchantID: m.ID, UpdatedAt: s.now()}
	if raw := ms["assets"]; !isNull(raw) {
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil || raw[0] != '[' {
			return payoutSettings{}, problem.OfField(problem.CodeInvalidField, "assets", `assets is an array: [{"asset": "USDC", "approval_threshold": "…", "daily_limit": "…", "reserve": "…"}]`)
		}
		seen := map[string]bool{}
		for i, item := range items {
			field := "assets[" + strconv.Itoa(i) + "]"
			am, perr := members(item, "asset", "approval_threshold", "daily_limit", "reserve")
			if perr != nil {
				perr.Field = field + "." + perr.Field
				return payoutSettings{}, perr
			}
			var n string
			if json.Unmarshal(am["asset"], &n) != nil || n == "" {
				return payoutSettings{}, problem.OfField(problem.CodeMissingField, field+".asset", "each entry names its asset")
			}
			a, ok := s.homeChain().assets.lookup(n)
			if !ok {
				return payoutSettings{}, problem.OfField(problem.CodeUnknownAsset, field+".asset", "asset "+strconv.Quote(n)+" is not accepted here")
			}
			if seen[a.Symbol] {
				return payoutSettings{}, problem.OfField(problem.CodeDuplicateField, field+".asset", "asset "+strconv.Quote(n)+" appears twice")
			}
			seen[a.Symbol] = true
			ap := store.AssetPolicy{Token: a.Token()}
			for _, f := range []struct {
				name string
				dst  **store.Amount
			}{{"approval_threshold", &ap.ApprovalThreshold}, {"daily_limit", &ap.DailyLimit}, {"reserve", &ap.Reserve}} {
				name, dst := f.name, f.dst // in order: the first bad member is the one reported, every time
				raw := am[name]
				if isNull(raw) {
					continue
				}
				var str string
				v, err := store.Amount{}, error(store.ErrInvalidAmount)
				if raw[0] == '"' && json.Unmarshal(raw, &str) == nil {
					v, err = store.ParseAmount(str)
				}
				if err != nil {
					return payoutSettings{}, problem.OfField(problem.CodeInvalidAmount, field+"."+name, name+" is a JSON string of base units, e.g. \"1000000\"")
				}
				*dst = &v
			}
			policy.Assets = append(policy.Assets, ap)
		}
	}
	if raw := ms["allowlist_enabled"]; !isNull(raw) {
		if json.Unmarshal(raw, &policy.AllowlistEnabled) != nil {
			return payoutSettings{}, problem.OfField(problem.CodeInvalidField, "allowlist_enabled", "allowlist_enabled is true or false")
		}
	}
	if raw := ms["allowlist"]; !isNull(raw) {
		var list []json.RawMessage
		if json.Unmarshal(raw, &list) != nil || len(list) > 1000 {
			return payoutSettings{}, problem.OfField(problem.CodeInvalidField, "allowlist", "allowlist is an array of at most 1000 addresses")
		}
		for _, item := range list {
			a, perr := parseAddressMember("allowlist", item)
			if perr != nil {
				return payoutSettings{}, perr
			}
			policy.Allowlist = append(policy.Allowlist, a)
		}
	}
	if raw := ms["paying_wallets"]; !isNull(raw) {
		var list []json.RawMessage
		if raw[0] != '[' || json.Unmarshal(raw, &list) != nil || len(list) > 100 {
			return payoutSettings{}, problem.OfField(problem.CodeInvalidField, "paying_wallets", "paying_wallets is an array of at most 100 addresses")
		}
		for i, item := range list {
			field := "paying_wallets[" + strconv.Itoa(i) + "]"
			a, perr := parseAddressMember(field, item)
			if perr != nil {
				return payoutSettings{}, perr
			}
			// The service's own addresses never pay a merchant-paid
			// request (the database refuses such a match too).
			if err := s.checkReserved(ctx, field, a); err != nil {
				return payoutSettings{}, err
			}
			if !slices.Contains(policy.PayingWallets, a) {
				policy.PayingWallets = append(policy.PayingWallets, a)
			}
		}
	}
	if err := s.st.PutPayoutPolicy(ctx, policy); err != nil {
		return payoutSettings{}, err
	}
	s.log.InfoContext(ctx, "payout settings changed", slog.Int64("merchant_id", m.ID))
	return s.settingsJSON(policy), nil
}

// PayoutWallet is the merchant's payout wallet: the address to fund
// (a plain transfer of the native coin or a token) and its payment
// request for the native coin.
type PayoutWallet struct {
	Address    store.ChecksumAddress `json:"address"`
	ChainID    uint64                `json:"chain_id"`
	PaymentURI string                `json:"payment_uri"`
	CreatedAt  time.Time             `json:"created_at"`
}

func (s *Service) handleGetPayoutWallet(w http.ResponseWriter, r *http.Request) {
	wl, err := s.PayoutWallet(r.Context(), principal(r).Merchant.ID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wl)
}
