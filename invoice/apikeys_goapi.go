package invoice

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/api"
)

// The merchant's scoped API keys in the Go API (issue #35: the dashboard
// manages them). Who may is the caller's decision: the HTTP API lets the
// merchant's own key only.

// APIKeyCreated is a new scoped key: Key, the secret, in this answer only.
type APIKeyCreated struct {
	api.APIKey
	Key string `json:"api_key"`
}

// APIKeys lists merchant merchantID's scoped keys, revoked ones included.
func (s *Service) APIKeys(ctx context.Context, merchantID int64) ([]api.APIKey, error) {
	ks, err := s.st.ListAPIKeys(ctx, merchantID)
	if err != nil {
		return nil, err
	}
	out := make([]api.APIKey, 0, len(ks))
	for _, k := range ks {
		out = append(out, api.NewAPIKey(k))
	}
	return out, nil
}

// CreateAPIKey makes a scoped key for p's merchant with scopes (store.AllScopes).
func (s *Service) CreateAPIKey(ctx context.Context, p Principal, name string, scopes []string) (APIKeyCreated, error) {
	body, err := json.Marshal(struct {
		Name   string   `json:"name"`
		Scopes []string `json:"scopes"`
	}{name, scopes})
	if err != nil {
		return APIKeyCreated{}, err
	}
	v, err := s.createAPIKeyFrom(ctx, p, body)
	if err != nil {
		return APIKeyCreated{}, err
	}
	return APIKeyCreated{APIKey: v.APIKey, Key: v.Key}, nil
}

// RevokeAPIKey revokes p's merchant's key id: it stops working at once,
// in every replica (store.ErrNotFound for another merchant's).
func (s *Service) RevokeAPIKey(ctx context.Context, p Principal, id int64) (api.APIKey, error) {
	return s.revokeAPIKey(ctx, p, id)
}

// PayoutSettings are a merchant's controls on what the service sends out
// for it: per asset the approval threshold, daily limit and payout-wallet
// reserve (base units), the payout allowlist and the paying wallets —
// the JSON of /v1/merchant/payout-settings.
type PayoutSettings struct {
	Assets           []AssetSettings         `json:"assets"`
	AllowlistEnabled bool                    `json:"allowlist_enabled"`
	Allowlist        []store.ChecksumAddress `json:"allowlist"`
	PayingWallets    []store.ChecksumAddress `json:"paying_wallets"`
	UpdatedAt        *time.Time              `json:"updated_at,omitempty"`
}

// AssetSettings are one asset's limits (nil: none).
type AssetSettings struct {
	// Asset is the asset's symbol (an unconfigured token's address).
	Asset             string        `json:"asset"`
	ApprovalThreshold *store.Amount `json:"approval_threshold,omitempty"`
	DailyLimit        *store.Amount `json:"daily_limit,omitempty"`
	Reserve           *store.Amount `json:"reserve,omitempty"`
}

// PayoutSettings returns merchant merchantID's payout settings.
func (s *Service) PayoutSettings(ctx context.Context, merchantID int64) (PayoutSettings, error) {
	pol, err := s.st.GetPayoutPolicy(ctx, merchantID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return PayoutSettings{}, err
	}
	return convertSettings(s.settingsJSON(pol))
}

// PutPayoutSettings replaces p's merchant's payout settings, checked as
// PUT /v1/merchant/payout-settings checks them (an owner's action: the
// HTTP API lets the merchant's own key only).
func (s *Service) PutPayoutSettings(ctx context.Context, p Principal, settings PayoutSettings) (PayoutSettings, error) {
	settings.UpdatedAt = nil
	body, err := json.Marshal(settings)
	if err != nil {
		return PayoutSettings{}, err
	}
	v, err := s.putPayoutSettingsFrom(ctx, p, body)
	if err != nil {
		return PayoutSettings{}, err
	}
	return convertSettings(v)
}

// convertSettings turns the HTTP API's settings into the Go API's (the
// same JSON).
func convertSettings(v payoutSettings) (PayoutSettings, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return PayoutSettings{}, err
	}
	var out PayoutSettings
	err = json.Unmarshal(b, &out)
	return out, err
}
