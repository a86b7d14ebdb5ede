package store

import (
	"encoding/json"

	"github.com/ethereum/go-ethereum/common"
)

// TokenTransfer is an indexed ERC-20 Transfer(address,address,uint256) log
// of a configured token, with the block hash the node reported.
type TokenTransfer struct {
	BlockNumber uint64      `db:"block_number" json:"block_number"`
	BlockHash   common.Hash `db:"block_hash" json:"block_hash"`
	TxHash      common.Hash `db:"tx_hash" json:"tx_hash"`
	TxIndex     int         `db:"tx_index" json:"transaction_index"`
	// LogIndex is the log's index in its block.
	LogIndex int            `db:"log_index" json:"log_index"`
	Token    common.Address `db:"token" json:"token"`
	From     common.Address `db:"from_address" json:"from"`
	To       common.Address `db:"to_address" json:"to"`
	// Value is in base units of the token.
	Value Amount `db:"value" json:"value"`
}

// MarshalJSON shows token, from and to in EIP-55.
func (t TokenTransfer) MarshalJSON() ([]byte, error) {
	type plain TokenTransfer
	return json.Marshal(struct {
		plain
		Token ChecksumAddress `json:"token"`
		From  ChecksumAddress `json:"from"`
		To    ChecksumAddress `json:"to"`
	}{plain(t), ChecksumAddress(t.Token), ChecksumAddress(t.From), ChecksumAddress(t.To)})
}

// InvoiceTokenTransfer is an indexed token transfer to an invoice's deposit
// address.
type InvoiceTokenTransfer struct {
	TokenTransfer
	InvoiceID int64 `db:"invoice_id"`
	// ChainID is the chain of the transfer (the handle's); the invoice's
	// may be another (a wrong-network payment).
	ChainID uint64 `db:"chain_id"`
}
