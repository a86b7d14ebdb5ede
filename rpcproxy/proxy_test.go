package rpcproxy

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

func TestSingleCall_ForwardsOriginalBytesUnchanged(t *testing.T) {
	t.Parallel()
	node := &echoNode{}
	_, url := newProxy(t, node, Config{Rate: noLimit})

	// Odd spacing, key order and an unknown member must reach the node as is.
	body := "{ \"id\" : \"a\",\n \"method\":\"eth_chainId\", \"x\":{\"y\":[1,2]}, \"jsonrpc\":\"2.0\" }"
	r := post(t, url, body)

	require.Equal(t, http.StatusOK, r.status)
	require.JSONEq(t, `{"jsonrpc":"2.0","id":"a","result":"eth_chainId"}`, r.body)
	require.Equal(t, []string{body}, node.received())
}

func TestBatch_AllAllowed_ForwardedUnchangedWithIDsAndOrder(t *testing.T) {
	t.Parallel()
	node := &echoNode{}
	_, url := newProxy(t, node, Config{Rate: noLimit})

	body := batchOf(callJSON(`"x"`, "eth_chainId"), callJSON("7", "eth_blockNumber"), callJSON("null", "net_version"))
	r := post(t, url, body)

	require.Equal(t, http.StatusOK, r.status)
	require.JSONEq(t, `[
		{"jsonrpc":"2.0","id":"x","result":"eth_chainId"},
		{"jsonrpc":"2.0","id":7,"result":"eth_blockNumber"},
		{"jsonrpc":"2.0","id":null,"result":"net_version"}]`, r.body)
	require.Equal(t, []string{body}, node.received())
}

func TestUpstreamURL_UserInfoSentAsBasicAuth(t *testing.T) {
	t.Parallel()
	node := &echoNode{}
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, pw, ok := r.BasicAuth(); !ok || u != "rpc" || pw != "s3cret" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		node.ServeHTTP(w, r)
	}))
	t.Cleanup(upstream.Close)
	_, url := newProxyTo(t, strings.Replace(upstream.URL, "http://", "http://rpc:s3cret@", 1), Config{Rate: noLimit})

	r := post(t, url, callJSON("1", "eth_chainId"))

	require.Equal(t, http.StatusOK, r.status, r.body)
}

func TestBatch_AtCap_Passes(t *testing.T) {
	t.Parallel()
	_, url := newProxy(t, &echoNode{}, Config{Rate: noLimit, MaxBatchSize: 5})

	calls := make([]string, 5)
	for i := range calls {
		calls[i] = callJSON(strconv.Itoa(i), "eth_blockNumber")
	}
	r := post(t, url, batchOf(calls...))

	require.Equal(t, http.StatusOK, r.status)
	rs := decodeBatch(t, r.body)
	require.Len(t, rs, 5)
	for i, res := range rs {
		require.Equal(t, strconv.Itoa(i), string(res.ID))
	}
}

func TestBatch_DefaultCap_100PassesAnd101Gets413(t *testing.T) {
	t.Parallel()
	node := &echoNode{}
	_, url := newProxy(t, node, Config{Rate: noLimit})

	calls := make([]string, 101)
	for i := range calls {
		calls[i] = callJSON(strconv.Itoa(i), "eth_blockNumber")
	}
	require.Equal(t, http.StatusOK, post(t, url, batchOf(calls[:100]...)).status)

	r := post(t, url, batchOf(calls...))
	require.Equal(t, http.StatusRequestEntityTooLarge, r.status)
	res := decodeOne(t, r.body)
	requireErrorCode(t, res, CodeBatchTooLarge)
	require.Equal(t, "null", string(res.ID))
	require.Len(t, node.received(), 1, "the refused batch must not reach the node")
}

func TestBatch_Empty_InvalidRequest(t *testing.T) {
	t.Parallel()
	_, url := newProxy(t, &echoNode{}, Config{Rate: noLimit})

	r := post(t, url, " [ ] ")

	require.Equal(t, http.StatusBadRequest, r.status)
	requireErrorCode(t, decodeOne(t, r.body), CodeInvalidRequest)
}

func TestPolicy_DebugTraceTransaction_BlockedSingle403(t *testing.T) {
	t.Parallel()
	node := &echoNode{}
	_, url := newProxy(t, node, Config{Rate: noLimit})

	r := post(t, url, callJSON("5", "debug_traceTransaction"))

	require.Equal(t, http.StatusForbidden, r.status)
	res := decodeOne(t, r.body)
	requireErrorCode(t, res, CodeMethodNotFound)
	require.Equal(t, "5", string(res.ID))
	require.Empty(t, node.received())
}

func TestPolicy_DebugTraceTransaction_BlockedInBatch_RestForwarded(t *testing.T) {
	t.Parallel()
	node := &echoNode{}
	_, url := newProxy(t, node, Config{Rate: noLimit})

	r := post(t, url, batchOf(
		callJSON(`"a"`, "eth_chainId"),
		callJSON(`"b"`, "debug_traceTransaction"),
		callJSON(`"c"`, "eth_blockNumber"),
	))

	require.Equal(t, http.StatusOK, r.status)
	rs := decodeBatch(t, r.body)
	require.Len(t, rs, 3)
	require.Equal(t, `"a"`, string(rs[0].ID))
	require.JSONEq(t, `"eth_chainId"`, string(rs[0].Result))
	require.Equal(t, `"b"`, string(rs[1].ID))
	requireErrorCode(t, rs[1], CodeMethodNotFound)
	require.Equal(t, `"c"`, string(rs[2].ID))
	require.JSONEq(t, `"eth_blockNumber"`, string(rs[2].Result))

	got := node.received()
	require.Len(t, got, 1)
	require.NotContains(t, got[0], "debug_")
	require.Len(t, decodeBatch(t, strings.ReplaceAll(got[0], `"params":[]`, `"result":0`)), 2)
}

func TestPolicy_DefaultDeniedNamespaces(t *testing.T) {
	t.Parallel()
	_, url := newProxy(t, &echoNode{}, Config{Rate: noLimit})

	for _, m := range []string{"admin_peers", "personal_sign", "miner_start", "engine_newPayloadV4", "txpool_content", "debug_getRawBlock"} {
		r := post(t, url, callJSON("1", m))
		require.Equal(t, http.StatusForbidden, r.status, m)
		requireErrorCode(t, decodeOne(t, r.body), CodeMethodNotFound)
	}
	require.Equal(t, http.StatusOK, post(t, url, callJSON("1", "eth_getBalance")).status)
}

// By default nothing that acts with the node's own accounts or changes the
// node's state reaches it (docs/rpcproxy.md lists them); what a wallet
// sends — signed transactions — and reads still do.
func TestPolicy_DefaultDenied_NodeAccountsAndState(t *testing.T) {
	t.Parallel()
	node := &echoNode{}
	_, url := newProxy(t, node, Config{Rate: noLimit})

	for _, m := range []string{
		"eth_sendTransaction", "eth_sign", "eth_signTransaction", "eth_signTypedData", "eth_signTypedData_v4",
		"ETH_SIGNtypeddata_v3", "eth_submitWork", "eth_submitHashrate", "personal_unlockAccount",
		"personal_sendTransaction", "admin_addPeer", "miner_setEtherbase", "txpool_content", "clique_propose",
	} {
		r := post(t, url, callJSON("1", m))
		require.Equal(t, http.StatusForbidden, r.status, m)
		requireErrorCode(t, decodeOne(t, r.body), CodeMethodNotFound)
	}
	require.Empty(t, node.received())
	for _, m := range []string{"eth_sendRawTransaction", "eth_call", "eth_getLogs", "eth_newFilter", "eth_accounts"} {
		require.Equal(t, http.StatusOK, post(t, url, callJSON("1", m)).status, m)
	}
}

func TestPolicy_AllowAndDenyLists(t *testing.T) {
	t.Parallel()
	_, url := newProxy(t, &echoNode{}, Config{
		Rate:         noLimit,
		AllowMethods: []string{"eth_", "net_version", "txpool_status", "debug_traceCall"},
		DenyMethods:  []string{"eth_sign", "eth_sendTransaction"},
	})

	for m, want := range map[string]int{
		"eth_chainId":         http.StatusOK,
		"net_version":         http.StatusOK,
		"txpool_status":       http.StatusOK, // DenyMethods replaced the defaults
		"net_peerCount":       http.StatusForbidden,
		"web3_clientVersion":  http.StatusForbidden,
		"eth_sign":            http.StatusForbidden,
		"eth_sendTransaction": http.StatusForbidden,
		"debug_traceCall":     http.StatusForbidden, // debug_ is never allowed
	} {
		require.Equal(t, want, post(t, url, callJSON("1", m)).status, m)
	}
}

func TestPolicy_EvasionAttemptsBlocked(t *testing.T) {
	t.Parallel()
	node := &echoNode{}
	_, url := newProxy(t, node, Config{Rate: noLimit})

	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"\u0064ebug_traceTransaction"}`,
		`{"jsonrpc":"2.0","id":1,"method":"DEBUG_traceTransaction"}`,
		`{"jsonrpc":"2.0","id":1,"Method":"debug_traceTransaction"}`,
		`{"jsonrpc":"2.0","id":1,"\u006Dethod":"debug_traceTransaction"}`,
		`{"jsonrpc":"2.0","id":1,"method":"eth_chainId","METHOD":"debug_traceTransaction"}`,
		`{"jsonrpc":"2.0","id":1,"method":"debug_traceTransaction ","x":1}`,
		`{"jsonrpc":"2.0","id":1,"method":"admin_peers"}`,
	} {
		r := post(t, url, body)
		require.Contains(t, []int{http.StatusForbidden, http.StatusBadRequest}, r.status, body)
		res := decodeOne(t, r.body)
		require.NotNil(t, res.Error, body)
	}
	require.Empty(t, node.received())
}

func TestInvalidCalls_AnsweredByProxy(t *testing.T) {
	t.Parallel()
	node := &echoNode{}
	_, url := newProxy(t, node, Config{Rate: noLimit})

	for _, body := range []string{
		`{"id":1,"method":"eth_chainId"}`,                    // no jsonrpc
		`{"jsonrpc":"1.0","id":1,"method":"eth_chainId"}`,    // wrong version
		`{"jsonrpc":"2.0","id":true,"method":"eth_chainId"}`, // bad id
		`{"jsonrpc":"2.0","id":1,"method":5}`,                // method not a string
		`{"jsonrpc":"2.0","id":1}`,                           // no method
		`{"jsonrpc":"2.0","id":1,"id":2,"method":"eth_chainId"}`,
		`42`, `"eth_chainId"`, `null`,
	} {
		r := post(t, url, body)
		require.Equal(t, http.StatusBadRequest, r.status, body)
		requireErrorCode(t, decodeOne(t, r.body), CodeInvalidRequest)
	}

	r := post(t, url, batchOf(`1`, callJSON("2", "eth_chainId"), `{"jsonrpc":"2.0","id":3}`))
	require.Equal(t, http.StatusOK, r.status)
	rs := decodeBatch(t, r.body)
	require.Len(t, rs, 3)
	requireErrorCode(t, rs[0], CodeInvalidRequest)
	require.Equal(t, "null", string(rs[0].ID))
	require.JSONEq(t, `"eth_chainId"`, string(rs[1].Result))
	requireErrorCode(t, rs[2], CodeInvalidRequest)
	require.Equal(t, "3", string(rs[2].ID))
	require.Len(t, node.received(), 1)
}

func TestPartialBatch_DuplicateAndNullIDs_MatchedByPosition(t *testing.T) {
	t.Parallel()
	node := &echoNode{reverse: true} // answers in reverse order
	_, url := newProxy(t, node, Config{Rate: noLimit})

	r := post(t, url, batchOf(
		callJSON("1", "eth_chainId"),
		callJSON("1", "eth_blockNumber"),
		callJSON("null", "net_version"),
		callJSON("1", "admin_peers"),
		callJSON("null", "eth_gasPrice"),
		`{"jsonrpc":"2.0","method":"eth_getBalance","params":[]}`, // notification
		callJSON(`{"bad":1}`, "eth_call"),
	))

	require.Equal(t, http.StatusOK, r.status)
	rs := decodeBatch(t, r.body)
	require.Len(t, rs, 6, "the notification gets no answer")
	wantIDs := []string{"1", "1", "null", "1", "null", "null"}
	wantResults := []string{"eth_chainId", "eth_blockNumber", "net_version", "", "eth_gasPrice", ""}
	for i := range rs {
		require.Equal(t, wantIDs[i], string(rs[i].ID), "element %d", i)
		if wantResults[i] == "" {
			require.NotNil(t, rs[i].Error, "element %d", i)
			continue
		}
		require.JSONEq(t, strconv.Quote(wantResults[i]), string(rs[i].Result), "element %d", i)
	}
	requireErrorCode(t, rs[3], CodeMethodNotFound)
	requireErrorCode(t, rs[5], CodeInvalidRequest)

	// The node saw positions as ids, and the notification untouched.
	got := node.received()
	require.Len(t, got, 1)
	var fwd []map[string]any
	require.NoError(t, json.Unmarshal([]byte(got[0]), &fwd))
	require.Len(t, fwd, 5)
	for i, want := range []any{0.0, 1.0, 2.0, 4.0} {
		require.Equal(t, want, fwd[i]["id"])
	}
	require.NotContains(t, fwd[4], "id")
}

func TestPartialBatch_UpstreamDropsAnAnswer_BadResponseForThatCall(t *testing.T) {
	t.Parallel()
	_, url := newProxy(t, &echoNode{drop: true}, Config{Rate: noLimit})

	r := post(t, url, batchOf(callJSON("1", "eth_chainId"), callJSON("2", "admin_peers"), callJSON("3", "eth_blockNumber")))

	require.Equal(t, http.StatusOK, r.status)
	rs := decodeBatch(t, r.body)
	require.Len(t, rs, 3)
	require.JSONEq(t, `"eth_chainId"`, string(rs[0].Result))
	requireErrorCode(t, rs[1], CodeMethodNotFound)
	requireErrorCode(t, rs[2], CodeUpstreamBadResponse)
	require.Equal(t, "3", string(rs[2].ID))
}

func TestPartialBatch_UpstreamAnswersGarbage_502PerElement(t *testing.T) {
	t.Parallel()
	node := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`<html>bad gateway</html>`))
	})
	_, url := newProxy(t, node, Config{Rate: noLimit})

	r := post(t, url, batchOf(callJSON(`"a"`, "eth_chainId"), callJSON(`"b"`, "admin_peers")))

	require.Equal(t, http.StatusBadGateway, r.status)
	rs := decodeBatch(t, r.body)
	require.Len(t, rs, 2)
	require.Equal(t, `"a"`, string(rs[0].ID))
	requireErrorCode(t, rs[0], CodeUpstreamBadResponse)
	requireErrorCode(t, rs[1], CodeMethodNotFound)
}

func TestPartialBatch_UpstreamRefusesBatch_ErrorGivenToEachCall(t *testing.T) {
	t.Parallel()
	node := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"batch too large"}}`))
	})
	_, url := newProxy(t, node, Config{Rate: noLimit})

	r := post(t, url, batchOf(callJSON(`"a"`, "eth_chainId"), callJSON(`"b"`, "admin_peers")))

	require.Equal(t, http.StatusOK, r.status)
	rs := decodeBatch(t, r.body)
	require.Len(t, rs, 2)
	require.Equal(t, `"a"`, string(rs[0].ID))
	requireErrorCode(t, rs[0], -32600)
	require.Equal(t, "batch too large", rs[0].Error.Message)
	requireErrorCode(t, rs[1], CodeMethodNotFound)
}

func TestRateLimit_BurstOverLimit_ExactNumberOf429s(t *testing.T) {
	t.Parallel()
	clock := newClock() // frozen: no token is refilled during the test
	node := &echoNode{}
	p, url := newProxy(t, node, Config{Rate: 1, Burst: 5, Now: clock.Now})

	var ok, limited int
	for i := range 12 {
		r := post(t, url, callJSON(strconv.Itoa(i), "eth_chainId"))
		switch r.status {
		case http.StatusOK:
			ok++
		case http.StatusTooManyRequests:
			limited++
			res := decodeOne(t, r.body)
			requireErrorCode(t, res, CodeRateLimited)
			require.Equal(t, strconv.Itoa(i), string(res.ID))
			require.Equal(t, "1", r.header.Get("Retry-After"))
		default:
			t.Fatalf("unexpected status %d: %s", r.status, r.body)
		}
	}
	require.Equal(t, 5, ok)
	require.Equal(t, 7, limited)
	require.Len(t, node.received(), 5)
	require.Equal(t, 7.0, counterValue(t, p.Gatherer(), "rpcproxy_rate_limited_calls_total", nil))

	clock.Add(2 * time.Second) // two tokens back
	require.Equal(t, http.StatusOK, post(t, url, callJSON("1", "eth_chainId")).status)
	require.Equal(t, http.StatusOK, post(t, url, callJSON("1", "eth_chainId")).status)
	require.Equal(t, http.StatusTooManyRequests, post(t, url, callJSON("1", "eth_chainId")).status)
}

func TestRateLimit_BatchPartlyLimited_PerElementErrors(t *testing.T) {
	t.Parallel()
	clock := newClock()
	node := &echoNode{}
	_, url := newProxy(t, node, Config{Rate: 1, Burst: 3, Now: clock.Now})

	r := post(t, url, batchOf(
		callJSON("10", "eth_chainId"),
		callJSON("11", "debug_traceTransaction"), // blocked: takes no token
		callJSON("12", "eth_blockNumber"),
		callJSON("13", "eth_gasPrice"),
		callJSON("14", "net_version"),
		callJSON("15", "eth_getBalance"),
	))

	require.Equal(t, http.StatusOK, r.status)
	rs := decodeBatch(t, r.body)
	require.Len(t, rs, 6)
	for i, res := range rs {
		require.Equal(t, strconv.Itoa(10+i), string(res.ID))
	}
	require.JSONEq(t, `"eth_chainId"`, string(rs[0].Result))
	requireErrorCode(t, rs[1], CodeMethodNotFound)
	require.JSONEq(t, `"eth_blockNumber"`, string(rs[2].Result))
	require.JSONEq(t, `"eth_gasPrice"`, string(rs[3].Result))
	requireErrorCode(t, rs[4], CodeRateLimited)
	requireErrorCode(t, rs[5], CodeRateLimited)
	require.Len(t, node.received(), 1)
}

func TestRateLimit_BatchWhollyLimited_429(t *testing.T) {
	t.Parallel()
	clock := newClock()
	node := &echoNode{}
	_, url := newProxy(t, node, Config{Rate: 1, Burst: 1, Now: clock.Now})
	require.Equal(t, http.StatusOK, post(t, url, callJSON("0", "eth_chainId")).status)

	r := post(t, url, batchOf(callJSON("1", "eth_chainId"), callJSON("2", "eth_blockNumber")))

	require.Equal(t, http.StatusTooManyRequests, r.status)
	rs := decodeBatch(t, r.body)
	require.Len(t, rs, 2)
	requireErrorCode(t, rs[0], CodeRateLimited)
	requireErrorCode(t, rs[1], CodeRateLimited)
	require.Len(t, node.received(), 1)
}

func TestRateLimit_BucketPerClientAddress(t *testing.T) {
	t.Parallel()
	clock := newClock()
	p, _ := newProxy(t, &echoNode{}, Config{Rate: 1, Burst: 2, Now: clock.Now})
	one := callJSON("1", "eth_chainId")

	require.Equal(t, http.StatusOK, serve(p, "192.0.2.1:1000", one).status)
	require.Equal(t, http.StatusOK, serve(p, "192.0.2.1:2000", one).status) // same host, other port
	require.Equal(t, http.StatusTooManyRequests, serve(p, "192.0.2.1:3000", one).status)
	require.Equal(t, http.StatusOK, serve(p, "192.0.2.2:1000", one).status)
	// IPv6 clients are keyed by their /64.
	require.Equal(t, http.StatusOK, serve(p, "[2001:db8::1]:1", one).status)
	require.Equal(t, http.StatusOK, serve(p, "[2001:db8::2]:1", one).status)
	require.Equal(t, http.StatusTooManyRequests, serve(p, "[2001:db8::3]:1", one).status)
	require.Equal(t, http.StatusOK, serve(p, "[2001:db8:0:1::1]:1", one).status)
}

func TestRateLimit_XForwardedFor_OnlyFromTrustedProxies(t *testing.T) {
	t.Parallel()
	cfg := Config{Rate: 1, Burst: 1, TrustedProxies: mustPrefixes("10.0.0.0/8")}
	p, err := New("http://127.0.0.1:1", cfg)
	require.NoError(t, err)

	key := func(remote string, xff ...string) clientKey {
		req := httptest.NewRequest(http.MethodPost, "/", nil)
		req.RemoteAddr = remote
		for _, v := range xff {
			req.Header.Add("X-Forwarded-For", v)
		}
		return p.clientKeyOf(req)
	}
	addr := func(s string) clientKey { return clientKey{addr: netipMust(s)} }

	// Untrusted peer: its header is ignored.
	require.Equal(t, addr("203.0.113.9"), key("203.0.113.9:5", "198.51.100.1"))
	// Trusted peer: the rightmost untrusted address is the client.
	require.Equal(t, addr("198.51.100.1"), key("10.0.0.1:5", "198.51.100.1"))
	require.Equal(t, addr("198.51.100.2"), key("10.0.0.1:5", "6.6.6.6, 198.51.100.2, 10.1.1.1"))
	require.Equal(t, addr("198.51.100.3"), key("10.0.0.1:5", "6.6.6.6", "198.51.100.3,10.2.2.2"))
	// Spoofed garbage stops the walk at the last trusted hop.
	require.Equal(t, addr("10.2.2.2"), key("10.0.0.1:5", "198.51.100.1, junk, 10.2.2.2"))
	// No header: the trusted peer itself.
	require.Equal(t, addr("10.0.0.1"), key("10.0.0.1:5"))
}

func TestRateLimit_ClientKeyHeader(t *testing.T) {
	t.Parallel()
	clock := newClock()
	p, _ := newProxy(t, &echoNode{}, Config{Rate: 1, Burst: 1, Now: clock.Now, ClientKeyHeader: "x-api-key"})
	one := callJSON("1", "eth_chainId")

	require.Equal(t, http.StatusOK, serve(p, "192.0.2.1:1", one, "X-Api-Key", "alpha").status)
	require.Equal(t, http.StatusTooManyRequests, serve(p, "192.0.2.2:1", one, "X-Api-Key", "alpha").status)
	require.Equal(t, http.StatusOK, serve(p, "192.0.2.1:1", one, "X-Api-Key", "beta").status)
	require.Equal(t, http.StatusOK, serve(p, "192.0.2.1:1", one).status) // no key: by address
	require.Equal(t, http.StatusTooManyRequests, serve(p, "192.0.2.1:1", one).status)
}

func TestBuckets_RefilledBucketsEvicted(t *testing.T) {
	t.Parallel()
	clock := newClock()
	p, _ := newProxy(t, &echoNode{}, Config{Rate: 10, Burst: 5, Now: clock.Now})
	one := callJSON("1", "eth_chainId")

	for i := range 200 {
		require.Equal(t, http.StatusOK, serve(p, fmt.Sprintf("198.51.100.%d:1", i), one).status)
	}
	require.Equal(t, 200, p.lim.len())

	clock.Add(sweepEvery) // every bucket has long refilled
	require.Equal(t, http.StatusOK, serve(p, "192.0.2.1:1", one).status)
	require.Equal(t, 1, p.lim.len())
}

func TestBuckets_DrainedBucketKeptUntilIdleTimeout(t *testing.T) {
	t.Parallel()
	clock := newClock()
	p, _ := newProxy(t, &echoNode{}, Config{Rate: 0.001, Burst: 1, Now: clock.Now, BucketIdleTimeout: 5 * time.Minute})
	one := callJSON("1", "eth_chainId")

	require.Equal(t, http.StatusOK, serve(p, "192.0.2.1:1", one).status)
	clock.Add(sweepEvery)
	require.Equal(t, http.StatusOK, serve(p, "192.0.2.2:1", one).status) // runs a sweep
	require.Equal(t, 2, p.lim.len(), "a drained bucket must survive the sweep")
	require.Equal(t, http.StatusTooManyRequests, serve(p, "192.0.2.1:1", one).status)

	clock.Add(5 * time.Minute)
	require.Equal(t, http.StatusOK, serve(p, "192.0.2.3:1", one).status)
	require.Equal(t, 1, p.lim.len(), "idle buckets are dropped")
}

func TestBuckets_MaxBucketsBoundsMemory(t *testing.T) {
	t.Parallel()
	clock := newClock()
	p, _ := newProxy(t, &echoNode{}, Config{Rate: 0.001, Burst: 1, Now: clock.Now, MaxBuckets: 50})
	one := callJSON("1", "eth_chainId")

	for i := range 1000 {
		serve(p, fmt.Sprintf("198.51.%d.%d:1", i/256, i%256), one)
		require.LessOrEqual(t, p.lim.len(), 50)
	}
	require.Equal(t, 50, p.lim.len())
}

func TestUpstreamDown_502ForEveryCall_ThenRecovers(t *testing.T) {
	t.Parallel()
	node := &echoNode{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	up := &http.Server{Handler: node}
	go up.Serve(ln)
	_, url := newProxyTo(t, "http://"+addr, Config{Rate: noLimit})

	require.Equal(t, http.StatusOK, post(t, url, callJSON("1", "eth_chainId")).status)

	require.NoError(t, up.Close()) // the node goes away
	r := post(t, url, callJSON("1", "eth_chainId"))
	require.Equal(t, http.StatusBadGateway, r.status)
	res := decodeOne(t, r.body)
	requireErrorCode(t, res, CodeUpstreamUnavailable)
	require.Equal(t, "1", string(res.ID))

	r = post(t, url, batchOf(callJSON(`"a"`, "eth_chainId"), callJSON(`"b"`, "debug_traceTransaction"), callJSON(`"c"`, "eth_blockNumber")))
	require.Equal(t, http.StatusBadGateway, r.status)
	rs := decodeBatch(t, r.body)
	require.Len(t, rs, 3)
	requireErrorCode(t, rs[0], CodeUpstreamUnavailable)
	requireErrorCode(t, rs[1], CodeMethodNotFound)
	requireErrorCode(t, rs[2], CodeUpstreamUnavailable)
	require.Equal(t, []string{`"a"`, `"b"`, `"c"`}, []string{string(rs[0].ID), string(rs[1].ID), string(rs[2].ID)})

	r = post(t, url, batchOf(callJSON(`"a"`, "eth_chainId"), callJSON(`"c"`, "eth_blockNumber")))
	require.Equal(t, http.StatusBadGateway, r.status)
	for _, res := range decodeBatch(t, r.body) {
		requireErrorCode(t, res, CodeUpstreamUnavailable)
	}

	// The node comes back on the same address: the next call goes through.
	ln, err = net.Listen("tcp", addr)
	require.NoError(t, err)
	up = &http.Server{Handler: node}
	go up.Serve(ln)
	t.Cleanup(func() { up.Close() })
	r = post(t, url, callJSON("2", "eth_chainId"))
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.JSONEq(t, `{"jsonrpc":"2.0","id":2,"result":"eth_chainId"}`, r.body)
}

func TestUpstreamTimeout_504(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	upstream := httptest.NewServer(slow)
	t.Cleanup(upstream.Close)
	t.Cleanup(func() { close(release) })
	_, url := newProxyTo(t, upstream.URL, Config{Rate: noLimit, UpstreamTimeout: 50 * time.Millisecond})

	r := post(t, url, callJSON("9", "eth_chainId"))
	require.Equal(t, http.StatusGatewayTimeout, r.status)
	res := decodeOne(t, r.body)
	requireErrorCode(t, res, CodeUpstreamTimeout)
	require.Equal(t, "9", string(res.ID))

	r = post(t, url, batchOf(callJSON("1", "eth_chainId"), callJSON("2", "admin_peers")))
	require.Equal(t, http.StatusGatewayTimeout, r.status)
	rs := decodeBatch(t, r.body)
	requireErrorCode(t, rs[0], CodeUpstreamTimeout)
	requireErrorCode(t, rs[1], CodeMethodNotFound)
}

func TestMalformedJSON_400ParseError(t *testing.T) {
	t.Parallel()
	node := &echoNode{}
	_, url := newProxy(t, node, Config{Rate: noLimit})

	for _, body := range []string{``, `{`, `{"jsonrpc":"2.0",}`, `[{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}`, `{} {}`, "\xff"} {
		r := post(t, url, body)
		require.Equal(t, http.StatusBadRequest, r.status, body)
		res := decodeOne(t, r.body)
		requireErrorCode(t, res, CodeParseError)
		require.Equal(t, "null", string(res.ID))
	}
	require.Empty(t, node.received())
}

func TestOversizedBody_413(t *testing.T) {
	t.Parallel()
	node := &echoNode{}
	_, url := newProxy(t, node, Config{Rate: noLimit, MaxBodyBytes: 1024})
	big := `{"jsonrpc":"2.0","id":1,"method":"eth_call","params":["` + strings.Repeat("a", 2000) + `"]}`

	// With a Content-Length.
	r := post(t, url, big)
	require.Equal(t, http.StatusRequestEntityTooLarge, r.status)
	requireErrorCode(t, decodeOne(t, r.body), CodeBodyTooLarge)

	// Chunked, without a Content-Length.
	req, err := http.NewRequest(http.MethodPost, url, struct{ *strings.Reader }{strings.NewReader(big)})
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)

	// Exactly at the limit is fine.
	exact := `{"jsonrpc":"2.0","id":1,"method":"eth_call","params":["` + strings.Repeat("a", 1024-58) + `"]}`
	require.Len(t, exact, 1024)
	require.Equal(t, http.StatusOK, post(t, url, exact).status)
	require.Len(t, node.received(), 1)
}

func TestNonPOST_405(t *testing.T) {
	t.Parallel()
	_, url := newProxy(t, &echoNode{}, Config{Rate: noLimit})

	for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodDelete} {
		r := do(t, m, url, "application/json", "")
		require.Equal(t, http.StatusMethodNotAllowed, r.status, m)
		require.Equal(t, "POST", r.header.Get("Allow"))
		requireErrorCode(t, decodeOne(t, r.body), CodeInvalidRequest)
	}
}

func TestContentType_415UnlessJSON(t *testing.T) {
	t.Parallel()
	_, url := newProxy(t, &echoNode{}, Config{Rate: noLimit})
	body := callJSON("1", "eth_chainId")

	for _, ct := range []string{"", "text/plain", "application/x-www-form-urlencoded", "application/jsonx"} {
		r := do(t, http.MethodPost, url, ct, body)
		require.Equal(t, http.StatusUnsupportedMediaType, r.status, ct)
		requireErrorCode(t, decodeOne(t, r.body), CodeInvalidRequest)
	}
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON", "application/json-rpc", "application/jsonrequest"} {
		require.Equal(t, http.StatusOK, do(t, http.MethodPost, url, ct, body).status, ct)
	}
}

func TestNotifications(t *testing.T) {
	t.Parallel()
	node := &echoNode{}
	_, url := newProxy(t, node, Config{Rate: noLimit})
	note := func(m string) string { return `{"jsonrpc":"2.0","method":"` + m + `","params":[]}` }

	// A batch of only refused notifications has nothing to answer.
	r := post(t, url, batchOf(note("admin_peers"), note("debug_x")))
	require.Equal(t, http.StatusOK, r.status)
	require.Empty(t, r.body)

	// A refused single notification still gets its HTTP status.
	r = post(t, url, note("admin_peers"))
	require.Equal(t, http.StatusForbidden, r.status)
	require.Empty(t, node.received())
}

func TestMetrics_CallsByMethodAndOutcome(t *testing.T) {
	t.Parallel()
	clock := newClock()
	p, url := newProxy(t, &echoNode{}, Config{Rate: 1, Burst: 3, Now: clock.Now})

	post(t, url, batchOf(callJSON("1", "eth_chainId"), callJSON("2", "debug_traceTransaction"), callJSON("3", "made_up_method")))
	post(t, url, callJSON("4", "eth_chainId"))
	post(t, url, callJSON("5", "eth_chainId")) // over the limit
	post(t, url, "{")

	g := p.Gatherer()
	calls := func(method, outcome string) float64 {
		return counterValue(t, g, "rpcproxy_calls_total", map[string]string{"method": method, "outcome": outcome})
	}
	require.Equal(t, 2.0, calls("eth_chainId", "forwarded"))
	require.Equal(t, 1.0, calls("eth_chainId", "rate_limited"))
	require.Equal(t, 1.0, calls("debug_traceTransaction", "blocked"))
	require.Equal(t, 1.0, calls("other", "forwarded"), "unknown names are bounded to \"other\"")
	require.Equal(t, 2.0, counterValue(t, g, "rpcproxy_requests_total", map[string]string{"code": "200"}))
	require.Equal(t, 1.0, counterValue(t, g, "rpcproxy_requests_total", map[string]string{"code": "429"}))
	require.Equal(t, 1.0, counterValue(t, g, "rpcproxy_requests_total", map[string]string{"code": "400"}))
	require.Equal(t, 1.0, counterValue(t, g, "rpcproxy_rate_limited_calls_total", nil))
	require.Equal(t, 2.0, counterValue(t, g, "rpcproxy_upstream_request_duration_seconds", nil))
}

func TestMetrics_HostRegistry(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	p, err := New("http://127.0.0.1:8545", Config{Registerer: reg})
	require.NoError(t, err)
	require.Same(t, reg, p.Gatherer())
	_, err = New("http://127.0.0.1:8545", Config{Registerer: reg})
	require.Error(t, err, "a second proxy on the same registry must be told so")

	// Two proxies share a registry when each wraps it with its own label.
	shared := prometheus.NewRegistry()
	for _, name := range []string{"a", "b"} {
		p, err := New("http://127.0.0.1:8545", Config{Registerer: prometheus.WrapRegistererWith(prometheus.Labels{"proxy": name}, shared)})
		require.NoError(t, err)
		require.Nil(t, p.Gatherer())
	}
}

func TestNew_RejectsBadConfig(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		url string
		cfg Config
	}{
		"no scheme":       {"127.0.0.1:8545", Config{}},
		"ws scheme":       {"ws://127.0.0.1:8546", Config{}},
		"negative rate":   {"http://n", Config{Rate: -1}},
		"negative batch":  {"http://n", Config{MaxBatchSize: -1}},
		"bad allow entry": {"http://n", Config{AllowMethods: []string{"eth chainId"}}},
		"bad deny entry":  {"http://n", Config{DenyMethods: []string{""}}},
		"bad ipv6 prefix": {"http://n", Config{IPv6PrefixLen: 129}},
	} {
		_, err := New(tc.url, tc.cfg)
		require.Error(t, err, name)
	}
}
