package rpcproxy

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseRequest_Offsets(t *testing.T) {
	t.Parallel()
	body := []byte(` [ {"jsonrpc":"2.0","id":"x","method":"eth_call","params":[{"to":"0x1"},"latest"]} , 5,` +
		`{"method":"eth_chainId","jsonrpc":"2.0"} ]`)

	calls, batch, res := parseRequest(body, 10, nil)

	require.Equal(t, parseOK, res)
	require.True(t, batch)
	require.Len(t, calls, 3)
	require.Equal(t, `"x"`, string(calls[0].id(body)))
	require.Equal(t, "eth_call", string(calls[0].methodName(body)))
	require.Equal(t, outcomeForwarded, calls[0].outcome)
	require.True(t, json.Valid(body[calls[0].start:calls[0].end]))
	require.Equal(t, outcomeInvalid, calls[1].outcome)
	require.Equal(t, "5", string(body[calls[1].start:calls[1].end]))
	require.False(t, calls[2].hasID)
	require.Equal(t, "eth_chainId", string(calls[2].methodName(body)))
}

func TestParseRequest_Results(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]parseResult{
		``:         parseMalformed,
		`[`:        parseMalformed,
		`{"a":1}x`: parseMalformed,
		`[]`:       parseEmptyBatch,
		` [ ] `:    parseEmptyBatch,
		`"x"`:      parseNotRequest,
		`[1,2,3]`:  parseBatchTooLarge,
		`[1,2]`:    parseOK,
		`{}`:       parseOK,
	} {
		_, _, res := parseRequest([]byte(body), 2, nil)
		require.Equal(t, want, res, body)
	}
}

// FuzzParseRequest checks that the parser never panics and that, for every
// call it would forward, it reads the same jsonrpc, id and method that
// encoding/json — which go-ethereum's RPC server uses — reads from the same
// bytes. A difference would let a call past the method policy.
func FuzzParseRequest(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}`,
		`[{"jsonrpc":"2.0","id":"a","method":"eth_call","params":[{"to":"0x0"},"latest"]},{"jsonrpc":"2.0","method":"eth_x"}]`,
		`{"jsonrpc":"2.0","id":null,"method":"\u0064ebug_traceTransaction"}`,
		`{"JSONRPC":"2.0","ID":1,"METHOD":"eth_chainId"}`,
		`{"jsonrpc":"2.0","id":1,"method":"eth_chainId","method":"debug_x"}`,
		`{"jſonrpc":"2.0","id":1,"method":"eth_chainId"}`,
		`{"jsonrpc":"2\u002e0","id":1e3,"method":"eth_chainId"}`,
		`{"jsonrpc":"2.0","id":{"a":1},"method":"eth_chainId"}`,
		`[1,"x",null,[],{}]`,
		`[]`, `{}`, `{`, ``, `"\"\\"`,
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"eth_\xffchainId\"}",
		`{"params":{"method":"debug_x","id":2},"jsonrpc":"2.0","id":1,"method":"eth_chainId"}`,
	} {
		f.Add([]byte(seed))
	}
	pol, err := newPolicy(nil, DefaultDenyMethods())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		calls, batch, res := parseRequest(body, 100, nil)
		if res == parseMalformed {
			if json.Valid(body) {
				t.Fatalf("valid JSON reported malformed: %q", body)
			}
			return
		}
		if !json.Valid(body) {
			t.Fatalf("invalid JSON accepted: %q", body)
		}
		if res != parseOK {
			return
		}
		trimmed := bytes.TrimLeft(body, " \t\r\n")
		if batch != (trimmed[0] == '[') {
			t.Fatalf("batch = %v for %q", batch, body)
		}
		for _, c := range calls {
			elem := body[c.start:c.end]
			if !json.Valid(elem) {
				t.Fatalf("element %q is not a JSON value", elem)
			}
			if c.outcome == outcomeInvalid {
				continue
			}
			var msg struct {
				Version string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Method  string          `json:"method"`
			}
			if err := json.Unmarshal(elem, &msg); err != nil {
				t.Fatalf("accepted call %q that encoding/json rejects: %v", elem, err)
			}
			if msg.Version != "2.0" {
				t.Fatalf("accepted version %q in %q", msg.Version, elem)
			}
			// Calls refused for their method name (outcome blocked) never
			// reach the node; compare the names of the others.
			if got := string(c.methodName(body)); c.outcome == outcomeForwarded && got != msg.Method {
				t.Fatalf("method %q, encoding/json reads %q in %q", got, msg.Method, elem)
			}
			if c.hasID != (msg.ID != nil) {
				t.Fatalf("hasID = %v, encoding/json id %q in %q", c.hasID, msg.ID, elem)
			}
			if c.hasID && string(c.id(body)) != string(msg.ID) {
				t.Fatalf("id %q, encoding/json reads %q in %q", c.id(body), msg.ID, elem)
			}
			if c.outcome == outcomeForwarded && pol.allowed(c.methodName(body)) &&
				strings.HasPrefix(strings.ToLower(msg.Method), "debug_") {
				t.Fatalf("policy lets %q through", elem)
			}
		}
	})
}

// The answer to a partly refused batch is assembled in a buffer sized, and
// taken from the memory budget, by spliceBound before it is written: the
// bound must hold whatever the caller and the node sent, or the buffer
// would grow past what was reserved.
func FuzzSpliceBound(f *testing.F) {
	f.Add([]byte(`[{"jsonrpc":"2.0","id":"a","method":"eth_chainId"},{"jsonrpc":"2.0","id":7,"method":"debug_x"},5]`),
		[]byte(`[{"jsonrpc":"2.0","id":0,"result":"0x1"}]`))
	f.Add([]byte(`[{"jsonrpc":"2.0","id":1,"method":"eth_a"},{"jsonrpc":"2.0","id":2,"method":"eth_b"},{"jsonrpc":"2.0","id":3,"method":"admin_c"}]`),
		[]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"`+strings.Repeat("x", 300)+`"}}`))
	f.Add([]byte(`[{"jsonrpc":"2.0","id":1,"method":"eth_a"},{"jsonrpc":"2.0","method":"eth_b"}]`),
		[]byte(`[{"id":0,"result":1},{"id":0,"result":2},{"id":"0"},{"id":1,"result":3}]`))
	pol, err := newPolicy(nil, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body, up []byte) {
		calls, _, res := parseRequest(body, 100, nil)
		if res != parseOK {
			return
		}
		for i := range calls {
			if c := &calls[i]; c.outcome == outcomeForwarded && !pol.allowed(c.methodName(body)) {
				c.outcome, c.err = outcomeBlocked, errBlocked
			}
		}
		upErr := matchResponses(up, calls)
		bound := spliceBound(body, up, upErr, len(calls))
		if out := assembleFrom(nil, body, up, calls, upErr); len(out) > bound {
			t.Fatalf("answer of %d bytes over the bound %d: body %q, node %q", len(out), bound, body, up)
		}
	})
}
