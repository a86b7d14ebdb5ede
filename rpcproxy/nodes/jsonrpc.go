package nodes

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
)

// JSON-RPC 2.0 is read and written with encoding/json: the request's
// calls (id and method) to route them, the nodes' answers to check them.

const methodSendRaw = "eth_sendRawTransaction"

// call is one call of a request as the pool needs it.
type call struct {
	ID     json.RawMessage `json:"id"` // nil: a notification; "null" is an id
	Method string          `json:"method"`

	raw json.RawMessage // the call's own bytes
}

func (c *call) notification() bool { return c.ID == nil }

// request is a parsed request body.
type request struct {
	body  []byte
	batch bool
	calls []call
	ok    bool // the body parsed as JSON-RPC calls
}

// parseRequest reads the calls of body. A body that is not a call or an
// array of calls is still forwarded (as a read) and answered by a node.
func parseRequest(body []byte) request {
	r := request{body: body}
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '[' {
		r.batch = true
		var raws []json.RawMessage
		if json.Unmarshal(body, &raws) != nil || len(raws) == 0 {
			return r
		}
		r.calls = make([]call, len(raws))
		for i, raw := range raws {
			if json.Unmarshal(raw, &r.calls[i]) != nil {
				return r
			}
			r.calls[i].raw = raw
		}
		r.ok = true
		return r
	}
	r.calls = make([]call, 1)
	if json.Unmarshal(body, &r.calls[0]) != nil {
		r.calls = nil
		return r
	}
	r.calls[0].raw = body
	r.ok = true
	return r
}

// has reports whether the request calls method.
func (r *request) has(method string) bool {
	for i := range r.calls {
		if r.calls[i].Method == method {
			return true
		}
	}
	return false
}

// sends counts the eth_sendRawTransaction calls.
func (r *request) sends() int {
	n := 0
	for i := range r.calls {
		if r.calls[i].Method == methodSendRaw {
			n++
		}
	}
	return n
}

// answer is one JSON-RPC response object.
type answer struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// rpcError is a JSON-RPC error object.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (a *answer) valid() bool { return a.Result != nil || a.Error != nil }

// parseAnswers checks that body is what a node answers to req: an answer
// object to a single call, an array of answer objects (one per call with
// an id) or one error object (the whole batch refused) to a batch. It
// returns the answers (nil for a request of notifications only).
func parseAnswers(req *request, body []byte) ([]answer, bool) {
	if !req.ok {
		return nil, json.Valid(body) || len(bytes.TrimSpace(body)) == 0
	}
	want := 0
	for i := range req.calls {
		if !req.calls[i].notification() {
			want++
		}
	}
	if want == 0 {
		return nil, true // nothing is owed; what came back does not matter
	}
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 {
		return nil, false
	}
	if trimmed[0] == '[' {
		if !req.batch {
			return nil, false
		}
		var as []answer
		if json.Unmarshal(body, &as) != nil || len(as) != want {
			return nil, false
		}
		for i := range as {
			if !as[i].valid() {
				return nil, false
			}
		}
		return as, true
	}
	var a answer
	if json.Unmarshal(body, &a) != nil || !a.valid() {
		return nil, false
	}
	if req.batch && a.Error == nil {
		return nil, false
	}
	return []answer{a}, true
}

// answerFor returns the answer to the call with id, or the one error
// object that refused a whole batch.
func answerFor(as []answer, batch bool, id json.RawMessage) *answer {
	if !batch {
		if len(as) == 1 {
			return &as[0]
		}
		return nil
	}
	for i := range as {
		if bytes.Equal(as[i].ID, id) {
			return &as[i]
		}
	}
	if len(as) == 1 && as[0].Error != nil && (len(as[0].ID) == 0 || string(as[0].ID) == "null") {
		return &as[0]
	}
	return nil
}

// quantity parses a JSON hex quantity ("0x1b4").
func quantity(raw json.RawMessage) (uint64, bool) {
	var q hexutil.Uint64
	if json.Unmarshal(raw, &q) != nil {
		return 0, false
	}
	return uint64(q), true
}

// txHash returns the hash of the signed transaction an
// eth_sendRawTransaction call carries.
func txHash(c *call) (common.Hash, bool) {
	var p struct {
		Params []hexutil.Bytes `json:"params"`
	}
	if json.Unmarshal(c.raw, &p) != nil || len(p.Params) != 1 {
		return common.Hash{}, false
	}
	var tx types.Transaction
	if tx.UnmarshalBinary(p.Params[0]) != nil {
		return common.Hash{}, false
	}
	return tx.Hash(), true
}

// withID returns the call's bytes with its id replaced by pos (the calls
// of a request the pool splits are matched by position).
func withID(c *call, pos int) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(c.raw, &m); err != nil {
		return nil, err
	}
	for k := range m {
		if len(k) == 2 && (k[0]|0x20) == 'i' && (k[1]|0x20) == 'd' {
			delete(m, k)
		}
	}
	m["id"] = json.RawMessage(strconv.Itoa(pos))
	return json.Marshal(m)
}
