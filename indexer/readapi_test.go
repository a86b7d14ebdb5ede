package indexer_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/indexer"
	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/postgres"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
)

type apiTx struct {
	Hash             common.Hash     `json:"hash"`
	BlockNumber      uint64          `json:"block_number"`
	BlockHash        common.Hash     `json:"block_hash"`
	TransactionIndex int             `json:"transaction_index"`
	From             common.Address  `json:"from"`
	To               *common.Address `json:"to"`
	ValueWei         string          `json:"value_wei"`
	Type             uint8           `json:"type"`
	Input            string          `json:"input"`
}

type apiBlock struct {
	Number           uint64      `json:"number"`
	Hash             common.Hash `json:"hash"`
	ParentHash       common.Hash `json:"parent_hash"`
	Timestamp        uint64      `json:"timestamp"`
	Time             time.Time   `json:"time"`
	BaseFeeWei       *string     `json:"base_fee_wei"`
	TransactionCount int         `json:"transaction_count"`
	Transactions     []apiTx     `json:"transactions"`
}

type apiPage struct {
	Transactions []apiTx `json:"transactions"`
	NextCursor   *string `json:"next_cursor"`
}

type apiProblem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Code   string `json:"code"`
}

// get requests path and decodes a 200 body into out, or returns the
// problem of any other status.
func get(t *testing.T, base, path string, out any) (int, apiProblem) {
	t.Helper()
	resp, err := http.Get(base + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if resp.StatusCode == http.StatusOK {
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		require.NoError(t, json.Unmarshal(body, out), string(body))
		return resp.StatusCode, apiProblem{}
	}
	require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"), string(body))
	var p apiProblem
	require.NoError(t, json.Unmarshal(body, &p), string(body))
	require.Equal(t, resp.StatusCode, p.Status)
	require.NotEmpty(t, p.Code)
	require.NotEmpty(t, p.Title)
	return resp.StatusCode, p
}

// indexedChain is a chain indexed into PostgreSQL with the read API
// mounted on a host mux beside another route.
type indexedChain struct {
	c    *chain
	st   *postgres.Store
	base string
	to   common.Address
	txs  []common.Hash // sent to `to`, oldest first
}

func newIndexedChain(t *testing.T) *indexedChain {
	t.Helper()
	ic := &indexedChain{c: newChain(t), st: pgtest.New(t), to: common.HexToAddress("0x00000000000000000000000000000000c0ffee00")}
	ic.c.mine(2, 1)
	for i := range 7 {
		ic.txs = append(ic.txs, ic.c.send(&ic.to))
		if i%2 == 0 {
			ic.c.send(nil)
		}
		ic.c.b.Commit()
	}
	start(t, ic.c.source(), ic.st, indexer.Config{Backfill: true})
	waitIndexed(t, ic.st, ic.c)

	api, err := indexer.NewReadAPI(ic.st, indexer.ReadAPIConfig{Logger: testLogger(t)})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/invoices", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "invoices") })
	api.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	ic.base = srv.URL
	return ic
}

func TestReadAPI_Blocks_WithTheirTransactions(t *testing.T) {
	t.Parallel()
	ic := newIndexedChain(t)
	head := ic.c.block(ic.c.head())

	var latest apiBlock
	status, _ := get(t, ic.base, "/v1/blocks/latest", &latest)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, head.NumberU64(), latest.Number)
	require.Equal(t, head.Hash(), latest.Hash)
	require.Equal(t, head.ParentHash(), latest.ParentHash)
	require.Equal(t, time.Unix(int64(head.Time()), 0).UTC(), latest.Time)
	require.Equal(t, head.BaseFee().String(), *latest.BaseFeeWei)
	require.Len(t, latest.Transactions, len(head.Transactions()))
	require.Equal(t, len(head.Transactions()), latest.TransactionCount)

	b3 := ic.c.block(3)
	for _, id := range []string{"3", b3.Hash().Hex(), strings.ToUpper(b3.Hash().Hex()[2:])} {
		if !strings.HasPrefix(id, "0x") && len(id) == 64 {
			id = "0X" + id
		}
		var b apiBlock
		status, _ := get(t, ic.base, "/v1/blocks/"+id, &b)
		require.Equal(t, http.StatusOK, status, id)
		require.Equal(t, b3.Hash(), b.Hash)
		require.Len(t, b.Transactions, len(b3.Transactions()))
		for i, tx := range b3.Transactions() {
			require.Equal(t, tx.Hash(), b.Transactions[i].Hash)
			require.Equal(t, i, b.Transactions[i].TransactionIndex)
			require.Equal(t, b3.Hash(), b.Transactions[i].BlockHash)
		}
	}

	for path, code := range map[string]string{
		"/v1/blocks/999":                     "block_not_found",
		"/v1/blocks/" + common.Hash{1}.Hex(): "block_not_found",
	} {
		status, p := get(t, ic.base, path, nil)
		require.Equal(t, http.StatusNotFound, status, path)
		require.Equal(t, code, p.Code, path)
	}
	for _, path := range []string{"/v1/blocks/abc", "/v1/blocks/-1", "/v1/blocks/0x12", "/v1/blocks/1.5",
		"/v1/blocks/99999999999999999999999", "/v1/blocks/0x" + strings.Repeat("zz", 32)} {
		status, p := get(t, ic.base, path, nil)
		require.Equal(t, http.StatusBadRequest, status, path)
		require.Equal(t, "invalid_block_id", p.Code, path)
	}

	// The host's own route still answers beside the API's.
	resp, err := http.Get(ic.base + "/v1/invoices")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, "invoices", string(body))
}

func TestReadAPI_Transaction(t *testing.T) {
	t.Parallel()
	ic := newIndexedChain(t)
	want, _, err := ic.c.client.TransactionByHash(context.Background(), ic.txs[2])
	require.NoError(t, err)
	receipt, err := ic.c.client.TransactionReceipt(context.Background(), ic.txs[2])
	require.NoError(t, err)

	var tx apiTx
	status, _ := get(t, ic.base, "/v1/transactions/"+ic.txs[2].Hex(), &tx)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, ic.txs[2], tx.Hash)
	require.Equal(t, receipt.BlockHash, tx.BlockHash)
	require.Equal(t, receipt.BlockNumber.Uint64(), tx.BlockNumber)
	require.Equal(t, ic.c.from, tx.From)
	require.Equal(t, ic.to, *tx.To)
	require.Equal(t, want.Value().String(), tx.ValueWei)
	require.Equal(t, want.Type(), tx.Type)
	require.Equal(t, "0x", tx.Input)

	status, p := get(t, ic.base, "/v1/transactions/"+common.Hash{9}.Hex(), nil)
	require.Equal(t, http.StatusNotFound, status)
	require.Equal(t, "transaction_not_found", p.Code)
	for _, h := range []string{"abc", "0x1234", ic.txs[2].Hex()[2:]} {
		status, p = get(t, ic.base, "/v1/transactions/"+h, nil)
		require.Equal(t, http.StatusBadRequest, status, h)
		require.Equal(t, "invalid_hash", p.Code)
	}
}

func TestReadAPI_AddressTransactions_CursorPagination(t *testing.T) {
	t.Parallel()
	ic := newIndexedChain(t)

	walk := func(addr common.Address, limit int) []common.Hash {
		var got []common.Hash
		path := "/v1/addresses/" + addr.Hex() + "/transactions?limit=" + itoa(limit)
		for pages := 0; ; pages++ {
			require.Less(t, pages, 100)
			var page apiPage
			status, p := get(t, ic.base, path, &page)
			require.Equal(t, http.StatusOK, status, p)
			require.LessOrEqual(t, len(page.Transactions), limit)
			for _, tx := range page.Transactions {
				got = append(got, tx.Hash)
			}
			if page.NextCursor == nil {
				return got
			}
			require.Len(t, page.Transactions, limit, "only the last page is short")
			path = "/v1/addresses/" + addr.Hex() + "/transactions?limit=" + itoa(limit) + "&cursor=" + url.QueryEscape(*page.NextCursor)
		}
	}

	// The recipient's transactions, newest first, across pages of 3.
	var want []common.Hash
	for i := len(ic.txs) - 1; i >= 0; i-- {
		want = append(want, ic.txs[i])
	}
	require.Equal(t, want, walk(ic.to, 3))
	require.Equal(t, want, walk(ic.to, 7), "an exact last page ends with no cursor")
	// The sender's: every transaction of the chain, newest first.
	var all []common.Hash
	for n := ic.c.head(); n > 0; n-- {
		txs := ic.c.block(n).Transactions()
		for i := len(txs) - 1; i >= 0; i-- {
			all = append(all, txs[i].Hash())
		}
	}
	require.Equal(t, all, walk(ic.c.from, 2))
	// An address with nothing.
	var empty apiPage
	status, _ := get(t, ic.base, "/v1/addresses/0x000000000000000000000000000000000000dEaD/transactions", &empty)
	require.Equal(t, http.StatusOK, status)
	require.Empty(t, empty.Transactions)
	require.NotNil(t, empty.Transactions, "an empty list, not null")
	require.Nil(t, empty.NextCursor)

	for path, code := range map[string]string{
		"/v1/addresses/0x1234/transactions":                                                      "invalid_address",
		"/v1/addresses/" + strings.Repeat("a", 40) + "/transactions":                             "invalid_address",
		"/v1/addresses/" + ic.to.Hex() + "/transactions?limit=0":                                 "invalid_limit",
		"/v1/addresses/" + ic.to.Hex() + "/transactions?limit=501":                               "invalid_limit",
		"/v1/addresses/" + ic.to.Hex() + "/transactions?limit=x":                                 "invalid_limit",
		"/v1/addresses/" + ic.to.Hex() + "/transactions?cursor=%21%21":                           "invalid_cursor",
		"/v1/addresses/" + ic.to.Hex() + "/transactions?cursor=MTox":                             "", // "1:1" is valid
		"/v1/addresses/" + ic.to.Hex() + "/transactions?cursor=" + b64("0:1"):                    "invalid_cursor",
		"/v1/addresses/" + ic.to.Hex() + "/transactions?cursor=" + b64("5"):                      "invalid_cursor",
		"/v1/addresses/" + ic.to.Hex() + "/transactions?cursor=" + b64("5:-1"):                   "invalid_cursor",
		"/v1/addresses/" + ic.to.Hex() + "/transactions?cursor=" + b64("99999999999999999999:1"): "invalid_cursor",
	} {
		var page apiPage
		status, p := get(t, ic.base, path, &page)
		if code == "" {
			require.Equal(t, http.StatusOK, status, path)
			continue
		}
		require.Equal(t, http.StatusBadRequest, status, path)
		require.Equal(t, code, p.Code, path)
	}
}

func TestReadAPI_StandaloneHandler_UnknownRouteAndMethod(t *testing.T) {
	t.Parallel()
	st := pgtest.New(t)
	api, err := indexer.NewReadAPI(st, indexer.ReadAPIConfig{})
	require.NoError(t, err)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)

	status, p := get(t, srv.URL, "/v1/blocks/latest", nil)
	require.Equal(t, http.StatusNotFound, status, "nothing indexed yet")
	require.Equal(t, "block_not_found", p.Code)
	status, p = get(t, srv.URL, "/v1/nothing", nil)
	require.Equal(t, http.StatusNotFound, status)
	require.Equal(t, "not_found", p.Code)

	resp, err := http.Post(srv.URL+"/v1/blocks/latest", "application/json", strings.NewReader("{}"))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	require.Equal(t, "GET, HEAD", resp.Header.Get("Allow"))
	var prob apiProblem
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&prob))
	require.Equal(t, "method_not_allowed", prob.Code)
}

// readPaths are one request of each route (all 200 on a healthy,
// indexed database).
func readPaths(ic *indexedChain) []string {
	return []string{
		"/v1/blocks/latest",
		"/v1/blocks/3",
		"/v1/blocks/" + ic.c.block(3).Hash().Hex(),
		"/v1/transactions/" + ic.txs[0].Hex(),
		"/v1/addresses/" + ic.to.Hex() + "/transactions?limit=2",
	}
}

func TestReadAPI_DatabaseStopped_EveryRead503(t *testing.T) {
	t.Parallel()
	ic := newIndexedChain(t)
	// A second store reaches the same database through a TCP relay: cutting
	// the relay is, to that store, the database server going away (refused
	// connections, dropped sessions), without disturbing the server that
	// other tests share.
	relay := newTCPRelay(t, ic.st)
	api, err := indexer.NewReadAPI(relay.store, indexer.ReadAPIConfig{QueryTimeout: 5 * time.Second})
	require.NoError(t, err)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)

	for _, path := range readPaths(ic) {
		var out json.RawMessage
		status, p := get(t, srv.URL, path, &out)
		require.Equal(t, http.StatusOK, status, "%s: %+v", path, p)
	}

	relay.stop()
	for _, path := range readPaths(ic) {
		for range 3 { // the pool's dropped connections, then refused dials
			status, p := get(t, srv.URL, path, nil)
			require.Equal(t, http.StatusServiceUnavailable, status, path)
			require.Equal(t, "unavailable", p.Code, path)
			require.NotContains(t, p.Detail, "dial", "no internals in the body")
		}
	}

	relay.start()
	require.Eventually(t, func() bool {
		resp, err := http.Get(srv.URL + "/v1/blocks/latest")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, waitFor, 10*time.Millisecond, "reads recover when the database is back")
}

func TestReadAPI_DatabaseRefusesConnections_503(t *testing.T) {
	t.Parallel()
	// A database of its own that stops accepting connections, its sessions
	// terminated: what a read sees when its database is shut down.
	st := pgtest.New(t)
	ctx := context.Background()
	require.NoError(t, st.SetCursor(ctx, store.Cursor{Name: store.CursorIndexer, BlockNumber: 1, UpdatedAt: time.Now()}))
	api, err := indexer.NewReadAPI(st, indexer.ReadAPIConfig{})
	require.NoError(t, err)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	status, _ := get(t, srv.URL, "/v1/blocks/latest", nil)
	require.Equal(t, http.StatusNotFound, status)

	var name string
	require.NoError(t, st.DB().GetContext(ctx, &name, `SELECT current_database()`))
	admin, err := postgres.Open(ctx, pgtest.AdminURL(t), postgres.Config{MaxOpenConns: 1})
	require.NoError(t, err)
	t.Cleanup(func() { admin.Close() })
	_, err = admin.DB().ExecContext(ctx, `ALTER DATABASE `+name+` ALLOW_CONNECTIONS false`)
	require.NoError(t, err)
	t.Cleanup(func() { admin.DB().ExecContext(ctx, `ALTER DATABASE `+name+` ALLOW_CONNECTIONS true`) })
	_, err = admin.DB().ExecContext(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, name)
	require.NoError(t, err)

	for _, path := range []string{"/v1/blocks/latest", "/v1/blocks/1", "/v1/transactions/" + common.Hash{1}.Hex(),
		"/v1/addresses/0x000000000000000000000000000000000000dEaD/transactions"} {
		status, p := get(t, srv.URL, path, nil)
		// The codes every evmpay API answers: unavailable (retry), or
		// internal for a failure the store could not classify.
		require.Contains(t, []string{"unavailable", "internal"}, p.Code, path)
		require.Equal(t, map[string]int{"unavailable": http.StatusServiceUnavailable, "internal": http.StatusInternalServerError}[p.Code], status, path)
	}
}

func TestReadAPI_StaleIndex_503(t *testing.T) {
	t.Parallel()
	st := pgtest.New(t)
	ctx := context.Background()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	api, err := indexer.NewReadAPI(st, indexer.ReadAPIConfig{StaleAfter: time.Minute, Now: func() time.Time { return now }})
	require.NoError(t, err)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)

	require.NoError(t, st.SetCursor(ctx, store.Cursor{Name: store.CursorIndexer, BlockNumber: 1, UpdatedAt: now.Add(-59 * time.Second)}))
	status, p := get(t, srv.URL, "/v1/blocks/1", nil)
	require.Equal(t, http.StatusNotFound, status)
	require.Equal(t, "block_not_found", p.Code)

	// The indexer has not written for longer than StaleAfter: it is not
	// running or the database cannot write (a full disk).
	require.NoError(t, st.SetCursor(ctx, store.Cursor{Name: store.CursorIndexer, BlockNumber: 1, UpdatedAt: now.Add(-61 * time.Second)}))
	for _, path := range []string{"/v1/blocks/latest", "/v1/blocks/1", "/v1/transactions/" + common.Hash{1}.Hex(),
		"/v1/addresses/0x000000000000000000000000000000000000dEaD/transactions"} {
		status, p := get(t, srv.URL, path, nil)
		require.Equal(t, http.StatusServiceUnavailable, status, path)
		require.Equal(t, "index_stale", p.Code, path)
	}
}

func TestIndexer_Heartbeat_KeepsTheIndexFreshWhileIdle(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	st := pgtest.New(t)
	var mu sync.Mutex
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	start(t, c.source(), st, indexer.Config{Now: clock, HeartbeatInterval: 15 * time.Second})
	waitIndexed(t, st, c)
	mu.Lock()
	now = now.Add(time.Hour)
	mu.Unlock()
	// No new block, yet the cursor's updated_at follows the clock.
	require.Eventually(t, func() bool {
		cur, err := st.GetCursor(context.Background(), store.CursorIndexer)
		return err == nil && cur.UpdatedAt.Equal(clock())
	}, waitFor, 5*time.Millisecond)
}

func itoa(n int) string { return strconv.Itoa(n) }

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// tcpRelay forwards TCP connections to a PostgreSQL server, and can be cut
// (listener closed, every connection dropped) and restored on the same
// address.
type tcpRelay struct {
	t      *testing.T
	target string
	addr   string
	store  *postgres.Store

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
}

// newTCPRelay opens a store on the database st uses, through a relay.
func newTCPRelay(t *testing.T, st *postgres.Store) *tcpRelay {
	t.Helper()
	ctx := context.Background()
	var name string
	require.NoError(t, st.DB().GetContext(ctx, &name, `SELECT current_database()`))
	u, err := url.Parse(pgtest.AdminURL(t))
	require.NoError(t, err)
	r := &tcpRelay{t: t, target: u.Host, conns: map[net.Conn]struct{}{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	r.addr = ln.Addr().String()
	r.serve(ln)
	t.Cleanup(r.stop)
	u.Host, u.Path = r.addr, "/"+name
	db, err := postgres.Open(ctx, u.String(), postgres.Config{MaxOpenConns: 4})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	r.store = db.Chain(st.ChainID()).(*postgres.Store)
	return r
}

func (r *tcpRelay) serve(ln net.Listener) {
	r.mu.Lock()
	r.ln = ln
	r.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", r.target)
			if err != nil {
				c.Close()
				continue
			}
			r.mu.Lock()
			r.conns[c], r.conns[up] = struct{}{}, struct{}{}
			r.mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
}

// stop cuts the relay: new connections are refused, open ones dropped.
func (r *tcpRelay) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ln != nil {
		r.ln.Close()
		r.ln = nil
	}
	for c := range r.conns {
		c.Close()
		delete(r.conns, c)
	}
}

// start restores the relay on its address.
func (r *tcpRelay) start() {
	ln, err := net.Listen("tcp", r.addr)
	require.NoError(r.t, err)
	r.serve(ln)
}

func TestReadAPI_UnparsableQuery_400(t *testing.T) {
	t.Parallel()
	st := pgtest.New(t)
	api, err := indexer.NewReadAPI(st, indexer.ReadAPIConfig{})
	require.NoError(t, err)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	for _, route := range []string{"transactions", "token-transfers"} {
		for _, q := range []string{"limit=1;x", "cursor=%zz"} {
			status, p := get(t, srv.URL, "/v1/addresses/0x70997970C51812dc3A010C7d01b50e0d17dc79C8/"+route+"?"+q, nil)
			require.Equal(t, http.StatusBadRequest, status, route+"?"+q)
			require.Equal(t, "invalid_query", p.Code, route+"?"+q)
		}
	}
}
