package invoice

import (
	"context"
	"encoding/json"

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
