package indexer

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/httpapi"
	"github.com/evmpay/evmpay/store/problem"
)

// ReadStore is what the read API needs from the database; store.Store
// satisfies it.
type ReadStore interface {
	GetBlock(ctx context.Context, number uint64) (store.Block, error)
	GetBlockByHash(ctx context.Context, hash common.Hash) (store.Block, error)
	LatestBlock(ctx context.Context) (store.Block, error)
	ListTxsByBlock(ctx context.Context, number uint64) ([]store.Transaction, error)
	GetTx(ctx context.Context, hash common.Hash) (store.Transaction, error)
	ListTxsByAddress(ctx context.Context, addr common.Address, beforeBlock uint64, beforeIndex int, limit int) ([]store.Transaction, error)
	GetCursor(ctx context.Context, name string) (store.Cursor, error)
	ListTokenTransfersByTx(ctx context.Context, hash common.Hash) ([]store.TokenTransfer, error)
	ListTokenTransfersByAddress(ctx context.Context, addr common.Address, beforeBlock uint64, beforeLogIndex int, limit int) ([]store.TokenTransfer, error)
}

var _ ReadStore = store.Store(nil)

// ReadAPIConfig tunes a ReadAPI. The zero value is usable.
type ReadAPIConfig struct {
	// StaleAfter makes every read fail with HTTP 500 (code index_stale)
	// when the indexer's cursor has not been written for this long. A
	// running indexer writes it with every block and, when there is none,
	// after each poll that confirmed the node's head at least every
	// Config.HeartbeatInterval (15 s); so an old cursor means no indexer
	// runs, the database cannot write (a full disk), or the node has been
	// unreachable: what the database holds may be stale. A database with
	// no cursor yet is not stale. Negative turns the check off. Defaults to
	// 2 minutes.
	StaleAfter time.Duration
	// PageSize is the number of transactions per page of an address's
	// transactions when the request has no limit. Defaults to 50.
	PageSize int
	// MaxPageSize is the largest limit a request may ask for. Defaults to
	// 500.
	MaxPageSize int
	// QueryTimeout bounds the database work of one request. Defaults to
	// 10 s.
	QueryTimeout time.Duration
	// Logger receives database failures (error). Defaults to a logger that
	// discards everything.
	Logger *slog.Logger
	// Now is the clock of the staleness check. Defaults to time.Now.
	Now func() time.Time
}

// ReadAPI serves the indexed chain from the database, as JSON:
//
//	GET /v1/blocks/latest                      the highest indexed block, with its transactions
//	GET /v1/blocks/{number-or-hash}            a block (decimal number or 0x hash), with its transactions
//	GET /v1/transactions/{hash}                a transaction
//	GET /v1/addresses/{address}/transactions   transactions from or to an address, newest first;
//	                                           ?limit=N&cursor=C, the next page's cursor in next_cursor
//	GET /v1/transactions/{hash}/token-transfers         the indexed token transfers of a transaction
//	GET /v1/addresses/{address}/token-transfers         token transfers from or to an address, newest
//	                                                    first; paged like transactions
//
// Errors are RFC 9457 problem JSON with a stable code: 400 invalid_block_id,
// invalid_hash, invalid_address, invalid_limit, invalid_cursor,
// invalid_query; 404
// block_not_found, transaction_not_found, not_found; 405
// method_not_allowed; 503 unavailable, index_stale; 500 internal — the
// codes and statuses every evmpay API shares (store/problem). A database
// failure never answers a partial or stale body with a success status.
type ReadAPI struct {
	st  ReadStore
	cfg ReadAPIConfig
	mux http.Handler
}

// NewReadAPI returns the read API over st.
func NewReadAPI(st ReadStore, cfg ReadAPIConfig) (*ReadAPI, error) {
	if st == nil {
		return nil, errors.New("indexer: NewReadAPI needs a store")
	}
	cfg.StaleAfter = cmp.Or(cfg.StaleAfter, 2*time.Minute)
	cfg.PageSize = cmp.Or(cfg.PageSize, 50)
	cfg.MaxPageSize = cmp.Or(cfg.MaxPageSize, 500)
	cfg.QueryTimeout = cmp.Or(cfg.QueryTimeout, 10*time.Second)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	switch {
	case cfg.PageSize < 0 || cfg.MaxPageSize < 0:
		return nil, errors.New("indexer: page sizes must not be negative")
	case cfg.PageSize > cfg.MaxPageSize:
		return nil, errors.New("indexer: PageSize must not exceed MaxPageSize")
	case cfg.QueryTimeout < 0:
		return nil, errors.New("indexer: QueryTimeout must not be negative")
	}
	mux := httpapi.NewMux()
	a := &ReadAPI{st: st, cfg: cfg, mux: mux}
	a.Register(mux)
	return a, nil
}

// Register adds the API's routes (Go 1.22 patterns, GET only) to mux, for
// hosts that serve several packages' handlers on one mux. Wrap the mux in
// httpapi.Problems (an httpapi.Mux is) for 404 and 405 problems.
func (a *ReadAPI) Register(mux httpapi.Router) {
	mux.Handle("GET /v1/blocks/latest", http.HandlerFunc(a.latestBlock))
	mux.Handle("GET /v1/blocks/{id}", http.HandlerFunc(a.block))
	mux.Handle("GET /v1/transactions/{hash}", http.HandlerFunc(a.transaction))
	mux.Handle("GET /v1/addresses/{address}/transactions", http.HandlerFunc(a.addressTransactions))
	mux.Handle("GET /v1/transactions/{hash}/token-transfers", http.HandlerFunc(a.transactionTokenTransfers))
	mux.Handle("GET /v1/addresses/{address}/token-transfers", http.HandlerFunc(a.addressTokenTransfers))
}

// ServeHTTP serves the API's routes; anything else is a 404 (or 405)
// problem.
func (a *ReadAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.mux.ServeHTTP(w, r) }

// Response bodies.

type blockJSON struct {
	Number           uint64                `json:"number"`
	Hash             common.Hash           `json:"hash"`
	ParentHash       common.Hash           `json:"parent_hash"`
	Timestamp        uint64                `json:"timestamp"`
	Time             time.Time             `json:"time"`
	Miner            store.ChecksumAddress `json:"miner"`
	GasLimit         uint64                `json:"gas_limit"`
	GasUsed          uint64                `json:"gas_used"`
	BaseFeeWei       *store.Amount         `json:"base_fee_wei"`
	TransactionCount int                   `json:"transaction_count"`
	Transactions     []txJSON              `json:"transactions"`
}

type txJSON struct {
	Hash              common.Hash            `json:"hash"`
	BlockNumber       uint64                 `json:"block_number"`
	BlockHash         common.Hash            `json:"block_hash"`
	TransactionIndex  int                    `json:"transaction_index"`
	From              store.ChecksumAddress  `json:"from"`
	To                *store.ChecksumAddress `json:"to"`
	ValueWei          store.Amount           `json:"value_wei"`
	Nonce             uint64                 `json:"nonce"`
	Gas               uint64                 `json:"gas"`
	Type              uint8                  `json:"type"`
	GasPriceWei       *store.Amount          `json:"gas_price_wei"`
	MaxFeeWei         *store.Amount          `json:"max_fee_wei"`
	MaxPriorityFeeWei *store.Amount          `json:"max_priority_fee_wei"`
	Input             hexutil.Bytes          `json:"input"`
}

type txPageJSON struct {
	Transactions []txJSON `json:"transactions"`
	// NextCursor is null on the last page.
	NextCursor *string `json:"next_cursor"`
}

func toBlockJSON(b store.Block, txs []store.Transaction) blockJSON {
	out := blockJSON{
		Number: b.Number, Hash: b.Hash, ParentHash: b.ParentHash, Timestamp: b.Timestamp,
		Time: time.Unix(int64(min(b.Timestamp, 1<<62)), 0).UTC(), Miner: store.ChecksumAddress(b.Miner), GasLimit: b.GasLimit,
		GasUsed: b.GasUsed, BaseFeeWei: b.BaseFeeWei, TransactionCount: b.TxCount,
		Transactions: make([]txJSON, len(txs)),
	}
	for i := range txs {
		out.Transactions[i] = toTxJSON(txs[i])
	}
	return out
}

func toTxJSON(t store.Transaction) txJSON {
	var to *store.ChecksumAddress
	if t.To != nil {
		a := store.ChecksumAddress(*t.To)
		to = &a
	}
	return txJSON{
		Hash: t.Hash, BlockNumber: t.BlockNumber, BlockHash: t.BlockHash, TransactionIndex: t.Index,
		From: store.ChecksumAddress(t.From), To: to, ValueWei: t.ValueWei, Nonce: t.Nonce, Gas: t.Gas, Type: t.Type,
		GasPriceWei: t.GasPriceWei, MaxFeeWei: t.MaxFeeWei, MaxPriorityFeeWei: t.MaxPriorityFeeWei,
		Input: t.Input,
	}
}

// Handlers.

func (a *ReadAPI) latestBlock(w http.ResponseWriter, r *http.Request) {
	a.serveBlock(w, r, func(ctx context.Context) (store.Block, error) { return a.st.LatestBlock(ctx) })
}

func (a *ReadAPI) block(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if strings.HasPrefix(id, "0x") || strings.HasPrefix(id, "0X") {
		h, ok := parseHash(id)
		if !ok {
			badBlockID(w)
			return
		}
		a.serveBlock(w, r, func(ctx context.Context) (store.Block, error) { return a.st.GetBlockByHash(ctx, h) })
		return
	}
	n, err := strconv.ParseUint(id, 10, 63)
	if err != nil {
		badBlockID(w)
		return
	}
	a.serveBlock(w, r, func(ctx context.Context) (store.Block, error) { return a.st.GetBlock(ctx, n) })
}

func badBlockID(w http.ResponseWriter) {
	problem.Reply(w, problem.CodeInvalidBlockID, "a block id is a decimal number or a 0x-prefixed 32-byte hash")
}

// serveBlock answers a block with its transactions. The two reads are not
// one snapshot, so they are checked against each other (a reorg may have
// replaced the block in between) and done again if they disagree.
func (a *ReadAPI) serveBlock(w http.ResponseWriter, r *http.Request, get func(context.Context) (store.Block, error)) {
	ctx, cancel, ok := a.begin(w, r)
	defer cancel()
	if !ok {
		return
	}
	for attempt := 0; ; attempt++ {
		b, err := get(ctx)
		if errors.Is(err, store.ErrNotFound) {
			problem.Reply(w, problem.CodeBlockNotFound, "no such block is indexed")
			return
		}
		if err != nil {
			a.fail(w, r, err)
			return
		}
		txs, err := a.st.ListTxsByBlock(ctx, b.Number)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		if consistent(b, txs) {
			writeJSON(w, toBlockJSON(b, txs))
			return
		}
		if attempt == 2 {
			a.fail(w, r, errors.New("block and transactions kept changing between reads"))
			return
		}
	}
}

func consistent(b store.Block, txs []store.Transaction) bool {
	if len(txs) != b.TxCount {
		return false
	}
	for i := range txs {
		if txs[i].BlockHash != b.Hash {
			return false
		}
	}
	return true
}

// readTxHash reads the transaction hash path value, answering 400 when it
// is malformed.
func readTxHash(w http.ResponseWriter, r *http.Request) (common.Hash, bool) {
	h, ok := parseHash(r.PathValue("hash"))
	if !ok {
		problem.Reply(w, problem.CodeInvalidHash, "a transaction hash is 0x followed by 64 hex digits")
	}
	return h, ok
}

func (a *ReadAPI) transaction(w http.ResponseWriter, r *http.Request) {
	h, ok := readTxHash(w, r)
	if !ok {
		return
	}
	ctx, cancel, ok := a.begin(w, r)
	defer cancel()
	if !ok {
		return
	}
	t, err := a.st.GetTx(ctx, h)
	if errors.Is(err, store.ErrNotFound) {
		problem.Reply(w, problem.CodeTxNotFound, "no such transaction is indexed")
		return
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, toTxJSON(t))
}

// addressPage is the address and page position of a request for an
// address's transactions or token transfers; ok is false when a problem
// was written.
type addressPage struct {
	addr        common.Address
	limit       int
	beforeBlock uint64
	beforeIndex int
}

// readAddressPage reads the address path value and the limit and cursor
// query parameters, answering 400 for any that is malformed.
func (a *ReadAPI) readAddressPage(w http.ResponseWriter, r *http.Request) (addressPage, bool) {
	addr, err := store.ParseAddress(r.PathValue("address"))
	if err != nil {
		problem.Write(w, problem.OfField(problem.CodeInvalidAddress, "address",
			"an address is 0x followed by 40 hex digits, in one case or with a valid EIP-55 checksum"))
		return addressPage{}, false
	}
	q, perr := httpapi.Query(r)
	if perr != nil {
		problem.Write(w, perr)
		return addressPage{}, false
	}
	p := addressPage{addr: addr, limit: a.cfg.PageSize}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > a.cfg.MaxPageSize {
			problem.Reply(w, problem.CodeInvalidLimit,
				fmt.Sprintf("limit is a whole number from 1 to %d", a.cfg.MaxPageSize))
			return addressPage{}, false
		}
		p.limit = n
	}
	if s := q.Get("cursor"); s != "" {
		var ok bool
		if p.beforeBlock, p.beforeIndex, ok = decodePageCursor(s); !ok {
			problem.Reply(w, problem.CodeInvalidCursor, "cursor must be a next_cursor value from a previous page")
			return addressPage{}, false
		}
	}
	return p, true
}

func (a *ReadAPI) addressTransactions(w http.ResponseWriter, r *http.Request) {
	pg, ok := a.readAddressPage(w, r)
	if !ok {
		return
	}
	addr, limit, beforeBlock, beforeIndex := pg.addr, pg.limit, pg.beforeBlock, pg.beforeIndex
	ctx, cancel, ok := a.begin(w, r)
	defer cancel()
	if !ok {
		return
	}
	txs, err := a.st.ListTxsByAddress(ctx, addr, beforeBlock, beforeIndex, limit+1)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	page := txPageJSON{Transactions: make([]txJSON, 0, min(len(txs), limit))}
	for i := range txs[:min(len(txs), limit)] {
		page.Transactions = append(page.Transactions, toTxJSON(txs[i]))
	}
	// A position in block 0 cannot be a cursor (it reads as "from the
	// top"); genesis blocks carry no transactions over JSON-RPC anyway.
	if len(txs) > limit && txs[limit-1].BlockNumber > 0 {
		c := encodePageCursor(txs[limit-1].BlockNumber, txs[limit-1].Index)
		page.NextCursor = &c
	}
	writeJSON(w, page)
}

// errStale: the indexer's cursor has not been written for StaleAfter.
var errStale = errors.New("the index is stale")

// checkFresh fails when the database is unreachable, or the index has not
// been written for StaleAfter (the database cannot write, or no indexer
// runs).
// begin bounds a request's database work by QueryTimeout and refuses it
// (answering 500) when the index is stale or unreadable.
func (a *ReadAPI) begin(w http.ResponseWriter, r *http.Request) (context.Context, context.CancelFunc, bool) {
	ctx, cancel := context.WithTimeout(r.Context(), a.cfg.QueryTimeout)
	if err := a.checkFresh(ctx); err != nil {
		a.fail(w, r, err)
		return ctx, cancel, false
	}
	return ctx, cancel, true
}

func (a *ReadAPI) checkFresh(ctx context.Context) error {
	if a.cfg.StaleAfter < 0 {
		return nil
	}
	c, err := a.st.GetCursor(ctx, store.CursorIndexer)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil:
		return err
	}
	if age := a.cfg.Now().Sub(c.UpdatedAt); age > a.cfg.StaleAfter {
		return fmt.Errorf("%w: last written %s ago", errStale, age.Round(time.Second))
	}
	return nil
}

// fail answers a failure to read, never a partial body: 503 index_stale
// or unavailable (the database did not answer), 500 internal otherwise —
// the codes every evmpay API shares (problem.FromError).
func (a *ReadAPI) fail(w http.ResponseWriter, r *http.Request, err error) {
	p, _ := problem.FromError(err)
	if errors.Is(err, errStale) {
		p = problem.Of(problem.CodeIndexStale, "the index has not been updated recently; the database may be unable to write")
	}
	a.cfg.Logger.ErrorContext(r.Context(), "indexer: read API failed", slog.String("path", r.URL.Path),
		slog.String("code", p.Code), slog.Any("error", err))
	problem.Write(w, p)
}

func writeJSON(w http.ResponseWriter, v any) { httpapi.WriteJSON(w, http.StatusOK, v) }

func parseHash(s string) (common.Hash, bool) {
	if len(s) != 66 || (s[:2] != "0x" && s[:2] != "0X") {
		return common.Hash{}, false
	}
	b, err := hexutil.Decode("0x" + s[2:])
	if err != nil {
		return common.Hash{}, false
	}
	return common.BytesToHash(b), true
}

// Page cursors are opaque to clients: base64url of "block:index" of the
// last transaction served.
func encodePageCursor(block uint64, index int) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatUint(block, 10) + ":" + strconv.Itoa(index)))
}

func decodePageCursor(s string) (uint64, int, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return 0, 0, false
	}
	bs, is, ok := strings.Cut(string(raw), ":")
	if !ok {
		return 0, 0, false
	}
	block, err := strconv.ParseUint(bs, 10, 63)
	if err != nil || block == 0 {
		return 0, 0, false
	}
	index, err := strconv.Atoi(is)
	if err != nil || index < 0 {
		return 0, 0, false
	}
	return block, index, true
}
