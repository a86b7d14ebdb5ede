package store

import (
	"context"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// APIKeyStore stores merchants' additional, scoped API keys.
type APIKeyStore interface {
	// CreateAPIKey inserts k and sets k.ID. ErrConflict on a digest
	// already used (by a key or a merchant's own key is not checked: the
	// digests are of 256-bit random keys).
	CreateAPIKey(ctx context.Context, k *APIKey) error
	// GetAPIKeyByDigest finds the key with this lookup digest, revoked or
	// not; ErrNotFound when none.
	GetAPIKeyByDigest(ctx context.Context, digest []byte) (APIKey, error)
	// ListAPIKeys returns the merchant's keys, revoked ones included, by id.
	ListAPIKeys(ctx context.Context, merchantID int64) ([]APIKey, error)
	// RevokeAPIKey sets the revocation time of the merchant's key id (the
	// first revocation's time stays) and returns the key. ErrNotFound when
	// the merchant has no such key.
	RevokeAPIKey(ctx context.Context, merchantID, id int64, at time.Time) (APIKey, error)
}

// PayoutPolicyStore stores merchants' payout policies.
type PayoutPolicyStore interface {
	// GetPayoutPolicy returns ErrNotFound when the merchant never set one.
	GetPayoutPolicy(ctx context.Context, merchantID int64) (PayoutPolicy, error)
	// PutPayoutPolicy inserts or replaces the merchant's policy.
	PutPayoutPolicy(ctx context.Context, p PayoutPolicy) error
}

// ServiceWalletStore records the wallets the service holds keys for.
type ServiceWalletStore interface {
	// RegisterServiceWallet records w, and w.LedgerFromBlock as its
	// opening block on the store's chain when set and the chain has none
	// (a wallet has one address on every chain, an opening block on each).
	// Registering the same address with the same role and merchant again
	// changes nothing else; ErrConflict when the address is recorded
	// otherwise, or the merchant already has another payout wallet.
	RegisterServiceWallet(ctx context.Context, w ServiceWallet) error
	// GetServiceWallet returns ErrNotFound for an address that is none of
	// the service's wallets.
	GetServiceWallet(ctx context.Context, addr common.Address) (ServiceWallet, error)
	// GetPayoutWallet returns the merchant's payout wallet; ErrNotFound
	// before the sweep role registered it.
	GetPayoutWallet(ctx context.Context, merchantID int64) (ServiceWallet, error)
	// ListServiceWallets returns every recorded wallet, by role then
	// address.
	ListServiceWallets(ctx context.Context) ([]ServiceWallet, error)
	// OpenServiceWallets sets the ledger's opening block on the store's
	// chain of every wallet that has none there yet to block (see
	// ServiceWallet.LedgerFromBlock, which the reads give for the store's
	// chain) and returns how many it set.
	OpenServiceWallets(ctx context.Context, block uint64) (int, error)
	// ListMerchantsWithoutPayoutWallet returns up to limit merchant ids
	// with no payout wallet yet, by id.
	ListMerchantsWithoutPayoutWallet(ctx context.Context, limit int) ([]int64, error)
}

// OutboundStore stores refunds and payouts.
type OutboundStore interface {
	// CreateOutbound inserts o and sets o.ID and o.Version. ErrConflict on
	// a claim token hash already used.
	CreateOutbound(ctx context.Context, o *Outbound) error
	GetOutbound(ctx context.Context, id int64) (Outbound, error)
	// GetOutboundForUpdate reads an outbound and, on PostgreSQL, locks its
	// row until the transaction ends.
	GetOutboundForUpdate(ctx context.Context, id int64) (Outbound, error)
	GetOutboundByClaimTokenHash(ctx context.Context, hash []byte) (Outbound, error)
	// UpdateOutbound writes every mutable field of o if its Version still
	// matches, then increments o.Version. ErrConflict when it changed
	// since it was read, or when the transfer it names (TxHash, LogIndex)
	// is already another outbound's; ErrInvariant when a merchant-paid
	// outbound would be settled by a transfer SentByService.
	UpdateOutbound(ctx context.Context, o *Outbound) error
	// SentByService reports whether a transfer belongs to the service: its
	// transaction is one the service signed (sweep_txs), or its sender is
	// an address the service holds the key of (a deposit address, archived
	// or not, or a service wallet). Such a transfer never pays a
	// merchant-paid outbound; the database refuses the match too.
	SentByService(ctx context.Context, txHash common.Hash, from common.Address) (bool, error)
	ListOutbounds(ctx context.Context, f OutboundFilter) ([]Outbound, error)
	// ClaimOutbounds leases up to limit outbounds the engine has work on
	// (QUEUED, AWAITING_PAYMENT, BROADCAST; next_attempt_at unset or ≤
	// now; no live lease) until now+lease. Concurrent callers never get
	// the same one.
	ClaimOutbounds(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]Outbound, error)
	// ListSweepTxsByOutbound returns the transactions signed for an
	// outbound (its send, and the gas fundings of a token send), by id.
	ListSweepTxsByOutbound(ctx context.Context, outboundID int64) ([]SweepTx, error)
}

// LedgerStore stores the append-only ledger. Payments write their own
// entries (the database does, with the payment row, and reverses them
// when a reorg deletes it); everything else is written by the part that
// makes or sees the movement, in the transaction that records it.
type LedgerStore interface {
	// InsertLedgerEntries appends entries (their IDs are not set). An
	// entry without MerchantID takes its invoice's, or its outbound's,
	// merchant.
	InsertLedgerEntries(ctx context.Context, es []LedgerEntry) error
	// ReverseLedgerEntries appends a reversal (From and To swapped,
	// Reverses set, At and RecordedAt at) of every entry of the sweep
	// transaction not reversed yet, and returns how many.
	ReverseLedgerEntries(ctx context.Context, sweepTxID int64, at time.Time) (int, error)
	// ListLedgerEntries returns one page of entries in (At, ID) order.
	ListLedgerEntries(ctx context.Context, f LedgerFilter) ([]LedgerEntry, error)
	// ScanLedgerEntries returns one page of entries in ID order, for the
	// reconciliation.
	ScanLedgerEntries(ctx context.Context, s LedgerScan) ([]LedgerEntry, error)
	// ListInboundTransfers returns the indexed native transactions with a
	// value and the token transfers to any of to, in blocks [from, through],
	// by block and position. BlockTime is the block's time in seconds.
	ListInboundTransfers(ctx context.Context, to []common.Address, from, through uint64) ([]InboundTransfer, error)
	// ListSweepTxsByHashes returns the stored transactions with these
	// hashes (the service's own), whatever their status.
	ListSweepTxsByHashes(ctx context.Context, hashes []common.Hash) ([]SweepTx, error)
}
