package sqlstore

import (
	"context"

	"github.com/evmpay/evmpay/store"
)

const merchantColumns = `id, name, api_key_digest, api_key_hash, api_key_prefix, webhook_url,
	webhook_secret_ciphertext, settlement_address, created_at, updated_at, disabled_at,
	underpayment_tolerance, external_id`

// CreateMerchant implements store.MerchantStore.
func (s *Store) CreateMerchant(ctx context.Context, m *store.Merchant) error {
	return s.namedGet(ctx, &m.ID, `
		INSERT INTO merchants (name, api_key_digest, api_key_hash, api_key_prefix, webhook_url,
			webhook_secret_ciphertext, settlement_address, created_at, updated_at, disabled_at,
			underpayment_tolerance, external_id)
		VALUES (:name, :api_key_digest, :api_key_hash, :api_key_prefix, :webhook_url,
			:webhook_secret_ciphertext, :settlement_address, :created_at, :updated_at, :disabled_at,
			:underpayment_tolerance, :external_id)
		RETURNING id`, m)
}

// GetMerchant implements store.MerchantStore.
func (s *Store) GetMerchant(ctx context.Context, id int64) (store.Merchant, error) {
	var m store.Merchant
	err := s.get(ctx, &m, `SELECT `+merchantColumns+` FROM merchants WHERE id = ?`, id)
	return m, err
}

// GetMerchantByAPIKeyDigest implements store.MerchantStore.
func (s *Store) GetMerchantByAPIKeyDigest(ctx context.Context, digest []byte) (store.Merchant, error) {
	var m store.Merchant
	err := s.getPrepared(ctx, &m, `SELECT `+merchantColumns+` FROM merchants WHERE api_key_digest = ?`, digest)
	return m, err
}

// GetMerchantByExternalID implements store.MerchantStore.
func (s *Store) GetMerchantByExternalID(ctx context.Context, externalID string) (store.Merchant, error) {
	var m store.Merchant
	if externalID == "" {
		return m, store.ErrNotFound
	}
	err := s.get(ctx, &m, `SELECT `+merchantColumns+` FROM merchants WHERE external_id = ?`, externalID)
	return m, err
}

// UpdateMerchant implements store.MerchantStore.
func (s *Store) UpdateMerchant(ctx context.Context, m store.Merchant) error {
	res, err := s.namedExec(ctx, `
		UPDATE merchants SET name = :name, api_key_digest = :api_key_digest,
			api_key_hash = :api_key_hash, api_key_prefix = :api_key_prefix,
			webhook_url = :webhook_url, webhook_secret_ciphertext = :webhook_secret_ciphertext,
			settlement_address = :settlement_address, updated_at = :updated_at,
			disabled_at = :disabled_at, underpayment_tolerance = :underpayment_tolerance
		WHERE id = :id`, m)
	if err != nil {
		return err
	}
	return mustAffect(res)
}

// ListMerchants implements store.MerchantStore.
func (s *Store) ListMerchants(ctx context.Context) ([]store.Merchant, error) {
	var ms []store.Merchant
	err := s.sel(ctx, &ms, `SELECT `+merchantColumns+` FROM merchants ORDER BY id`)
	return ms, err
}

// GetMerchantForUpdate implements store.MerchantStore.
func (s *Store) GetMerchantForUpdate(ctx context.Context, id int64) (store.Merchant, error) {
	var m store.Merchant
	err := s.get(ctx, &m, `SELECT `+merchantColumns+` FROM merchants WHERE id = ?`+s.d.ForUpdate, id)
	return m, err
}
