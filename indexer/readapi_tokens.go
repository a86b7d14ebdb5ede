package indexer

import (
	"errors"
	"net/http"

	"github.com/ethereum/go-ethereum/common"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/problem"
)

// The read API's token-transfer routes (see ReadAPI).

type tokenTransferJSON struct {
	BlockNumber      uint64                `json:"block_number"`
	BlockHash        common.Hash           `json:"block_hash"`
	TransactionHash  common.Hash           `json:"transaction_hash"`
	TransactionIndex int                   `json:"transaction_index"`
	LogIndex         int                   `json:"log_index"`
	Token            store.ChecksumAddress `json:"token"`
	From             store.ChecksumAddress `json:"from"`
	To               store.ChecksumAddress `json:"to"`
	Value            store.Amount          `json:"value"` // base units of the token
}

type tokenTransferPageJSON struct {
	TokenTransfers []tokenTransferJSON `json:"token_transfers"`
	// NextCursor is null on the last page (always, for a transaction's).
	NextCursor *string `json:"next_cursor"`
}

func toTokenTransfersJSON(ts []store.TokenTransfer) []tokenTransferJSON {
	out := make([]tokenTransferJSON, len(ts))
	for i, t := range ts {
		out[i] = tokenTransferJSON{BlockNumber: t.BlockNumber, BlockHash: t.BlockHash, TransactionHash: t.TxHash,
			TransactionIndex: t.TxIndex, LogIndex: t.LogIndex, Token: store.ChecksumAddress(t.Token), From: store.ChecksumAddress(t.From),
			To: store.ChecksumAddress(t.To), Value: t.Value}
	}
	return out
}

func (a *ReadAPI) transactionTokenTransfers(w http.ResponseWriter, r *http.Request) {
	h, ok := readTxHash(w, r)
	if !ok {
		return
	}
	ctx, cancel, ok := a.begin(w, r)
	defer cancel()
	if !ok {
		return
	}
	ts, err := a.st.ListTokenTransfersByTx(ctx, h)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if len(ts) == 0 {
		if _, err := a.st.GetTx(ctx, h); errors.Is(err, store.ErrNotFound) {
			problem.Reply(w, problem.CodeTxNotFound, "no such transaction is indexed")
			return
		} else if err != nil {
			a.fail(w, r, err)
			return
		}
	}
	writeJSON(w, tokenTransferPageJSON{TokenTransfers: toTokenTransfersJSON(ts)})
}

func (a *ReadAPI) addressTokenTransfers(w http.ResponseWriter, r *http.Request) {
	pg, ok := a.readAddressPage(w, r)
	if !ok {
		return
	}
	addr, limit, beforeBlock, beforeLog := pg.addr, pg.limit, pg.beforeBlock, pg.beforeIndex
	ctx, cancel, ok := a.begin(w, r)
	defer cancel()
	if !ok {
		return
	}
	ts, err := a.st.ListTokenTransfersByAddress(ctx, addr, beforeBlock, beforeLog, limit+1)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	page := tokenTransferPageJSON{TokenTransfers: toTokenTransfersJSON(ts[:min(len(ts), limit)])}
	if len(ts) > limit && ts[limit-1].BlockNumber > 0 {
		c := encodePageCursor(ts[limit-1].BlockNumber, ts[limit-1].LogIndex)
		page.NextCursor = &c
	}
	writeJSON(w, page)
}
