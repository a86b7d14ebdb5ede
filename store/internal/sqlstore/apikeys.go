package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/evmpay/evmpay/store"
)

const apiKeyColumns = `id, merchant_id, name, digest, hash, prefix, scopes, created_at, revoked_at`

// CreateAPIKey implements store.APIKeyStore.
func (s *Store) CreateAPIKey(ctx context.Context, k *store.APIKey) error {
	return s.namedGet(ctx, &k.ID, `INSERT INTO api_keys (merchant_id, name, digest, hash, prefix, scopes,
			created_at, revoked_at)
		VALUES (:merchant_id, :name, :digest, :hash, :prefix, :scopes, :created_at, :revoked_at)
		RETURNING id`, k)
}

// GetAPIKeyByDigest implements store.APIKeyStore.
func (s *Store) GetAPIKeyByDigest(ctx context.Context, digest []byte) (store.APIKey, error) {
	var k store.APIKey
	err := s.getPrepared(ctx, &k, `SELECT `+apiKeyColumns+` FROM api_keys WHERE digest = ?`, digest)
	return k, err
}

// ListAPIKeys implements store.APIKeyStore.
func (s *Store) ListAPIKeys(ctx context.Context, merchantID int64) ([]store.APIKey, error) {
	var ks []store.APIKey
	err := s.sel(ctx, &ks, `SELECT `+apiKeyColumns+` FROM api_keys WHERE merchant_id = ? ORDER BY id`, merchantID)
	return ks, err
}

// RevokeAPIKey implements store.APIKeyStore.
func (s *Store) RevokeAPIKey(ctx context.Context, merchantID, id int64, at time.Time) (store.APIKey, error) {
	var k store.APIKey
	err := s.withTx(ctx, func(t *Store) error {
		if _, err := t.exec(ctx, `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?)
			WHERE id = ? AND merchant_id = ?`, at, id, merchantID); err != nil {
			return err
		}
		return t.get(ctx, &k, `SELECT `+apiKeyColumns+` FROM api_keys WHERE id = ? AND merchant_id = ?`, id, merchantID)
	})
	return k, err
}

// policyJSON is a payout policy's stored form.
type policyJSON struct {
	Assets           []store.AssetPolicy `json:"assets"`
	AllowlistEnabled bool                `json:"allowlist_enabled"`
	Allowlist        []common.Address    `json:"allowlist"`
	PayingWallets    []common.Address    `json:"paying_wallets,omitempty"`
}

// GetPayoutPolicy implements store.PayoutPolicyStore.
func (s *Store) GetPayoutPolicy(ctx context.Context, merchantID int64) (store.PayoutPolicy, error) {
	var row struct {
		MerchantID int64     `db:"merchant_id"`
		Policy     string    `db:"policy"`
		UpdatedAt  time.Time `db:"updated_at"`
	}
	if err := s.get(ctx, &row, `SELECT merchant_id, policy, updated_at FROM payout_policies WHERE merchant_id = ?`,
		merchantID); err != nil {
		return store.PayoutPolicy{}, err
	}
	var j policyJSON
	if err := json.Unmarshal([]byte(row.Policy), &j); err != nil {
		return store.PayoutPolicy{}, fmt.Errorf("payout policy of merchant %d: %w", merchantID, err)
	}
	return store.PayoutPolicy{MerchantID: row.MerchantID, Assets: j.Assets, AllowlistEnabled: j.AllowlistEnabled,
		Allowlist: j.Allowlist, PayingWallets: j.PayingWallets, UpdatedAt: row.UpdatedAt}, nil
}

// PutPayoutPolicy implements store.PayoutPolicyStore.
func (s *Store) PutPayoutPolicy(ctx context.Context, p store.PayoutPolicy) error {
	b, err := json.Marshal(policyJSON{Assets: p.Assets, AllowlistEnabled: p.AllowlistEnabled, Allowlist: p.Allowlist,
		PayingWallets: p.PayingWallets})
	if err != nil {
		return err
	}
	_, err = s.exec(ctx, `INSERT INTO payout_policies (merchant_id, policy, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (merchant_id) DO UPDATE SET policy = excluded.policy, updated_at = excluded.updated_at`,
		p.MerchantID, string(b), p.UpdatedAt)
	return err
}

// selectWallet reads service wallets with their ledger's opening block on
// the bound chain (none on an unbound handle: chain 0 has no rows); its
// one parameter is the chain.
const selectWallet = `SELECT w.address, w.role, w.merchant_id, w.created_at, l.from_block AS ledger_from_block
	FROM service_wallets w LEFT JOIN service_wallet_ledger l ON l.chain_id = ? AND l.address = w.address`

// RegisterServiceWallet implements store.ServiceWalletStore.
func (s *Store) RegisterServiceWallet(ctx context.Context, w store.ServiceWallet) error {
	return s.withTx(ctx, func(t *Store) error {
		var have store.ServiceWallet
		err := t.get(ctx, &have, `SELECT address, role, merchant_id, created_at FROM service_wallets WHERE address = ?`+t.d.ForUpdate, w.Address)
		switch {
		case err == nil:
			if have.Role != w.Role || !sameID(have.MerchantID, w.MerchantID) {
				return fmt.Errorf("%w: %s is already the %s wallet", store.ErrConflict, w.Address.Hex(), have.Role)
			}
		case !errors.Is(err, store.ErrNotFound):
			return err
		default:
			// Two chains' sweeps of one process register the same wallets
			// at once: the second insert finds the first's row (after it
			// commits) and checks it as above.
			if _, err = t.exec(ctx, `INSERT INTO service_wallets (address, role, merchant_id, created_at)
				VALUES (?, ?, ?, ?) ON CONFLICT (address) DO NOTHING`, w.Address, w.Role, w.MerchantID, w.CreatedAt); err != nil {
				return err
			}
			if err := t.get(ctx, &have, `SELECT address, role, merchant_id, created_at FROM service_wallets WHERE address = ?`, w.Address); err != nil {
				return err
			}
			if have.Role != w.Role || !sameID(have.MerchantID, w.MerchantID) {
				return fmt.Errorf("%w: %s is already the %s wallet", store.ErrConflict, w.Address.Hex(), have.Role)
			}
		}
		if w.LedgerFromBlock == nil {
			return nil
		}
		// Its opening block on the bound chain, unless that chain's
		// ledger has one already.
		c, err := t.chainID()
		if err != nil {
			return err
		}
		_, err = t.exec(ctx, `INSERT INTO service_wallet_ledger (chain_id, address, from_block) VALUES (?, ?, ?)
			ON CONFLICT (chain_id, address) DO NOTHING`, c, w.Address, *w.LedgerFromBlock)
		return err
	})
}

// OpenServiceWallets implements store.ServiceWalletStore: the wallets
// without an opening block on the bound chain get block.
func (s *Store) OpenServiceWallets(ctx context.Context, block uint64) (int, error) {
	c, err := s.chainID()
	if err != nil {
		return 0, err
	}
	res, err := s.exec(ctx, `INSERT INTO service_wallet_ledger (chain_id, address, from_block)
		SELECT ?, w.address, ? FROM service_wallets w
		WHERE NOT EXISTS (SELECT 1 FROM service_wallet_ledger l WHERE l.chain_id = ? AND l.address = w.address)`, c, block, c)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}

func sameID(a, b *int64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

// GetServiceWallet implements store.ServiceWalletStore.
func (s *Store) GetServiceWallet(ctx context.Context, addr common.Address) (store.ServiceWallet, error) {
	var w store.ServiceWallet
	err := s.get(ctx, &w, selectWallet+` WHERE w.address = ?`, s.chain, addr)
	return w, err
}

// GetPayoutWallet implements store.ServiceWalletStore.
func (s *Store) GetPayoutWallet(ctx context.Context, merchantID int64) (store.ServiceWallet, error) {
	var w store.ServiceWallet
	err := s.get(ctx, &w, selectWallet+` WHERE w.role = 'payout' AND w.merchant_id = ?`, s.chain, merchantID)
	return w, err
}

// ListServiceWallets implements store.ServiceWalletStore.
func (s *Store) ListServiceWallets(ctx context.Context) ([]store.ServiceWallet, error) {
	var ws []store.ServiceWallet
	err := s.sel(ctx, &ws, selectWallet+` ORDER BY w.role, w.address`, s.chain)
	return ws, err
}

// ListMerchantsWithoutPayoutWallet implements store.ServiceWalletStore.
func (s *Store) ListMerchantsWithoutPayoutWallet(ctx context.Context, n int) ([]int64, error) {
	var ids []int64
	err := s.sel(ctx, &ids, `SELECT m.id FROM merchants m
		WHERE NOT EXISTS (SELECT 1 FROM service_wallets w WHERE w.role = 'payout' AND w.merchant_id = m.id)
		ORDER BY m.id LIMIT ?`, limit(n, 100, 1000))
	return ids, err
}
