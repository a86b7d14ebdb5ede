// Package rpcreplay records what a real Ethereum JSON-RPC node answers and
// replays it, so that tests run the project's chain-facing code against a
// real node's answers without the node: a Cosmos EVM node (evmd) cannot be
// built within CI's time, but what it said can be kept.
//
// A Recorder is an http.Handler that forwards every request to the node
// unchanged and writes each call with its answer to a transcript. A
// Replayer is an http.Handler that answers from a transcript: a frozen
// chain at a head the test chooses. It answers block requests from the
// recorded blocks (a block recorded with full transactions also answers a
// request for its header, with transaction hashes only, as nodes do), logs
// by block hash filtered as asked, and every other call exactly as
// recorded. A call the transcript does not hold is a JSON-RPC error naming
// it: record again (the test that records says how).
package rpcreplay

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
)

// Call is one JSON-RPC call and the node's answer: Result, or Error.
type Call struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *Error          `json:"error,omitempty"`
}

// Error is a JSON-RPC error object.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("json-rpc error %d: %s", e.Code, e.Message) }

// key identifies a call by method and compacted params.
func key(method string, params json.RawMessage) string {
	var b bytes.Buffer
	if len(params) > 0 && json.Compact(&b, params) == nil {
		return method + " " + b.String()
	}
	return method + " " + string(params)
}

// request and response are the wire forms.
type request struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
}

type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// decodeBody splits a JSON-RPC body into its calls; batch reports whether
// it was an array.
func decodeBody[T any](body []byte) (calls []T, batch bool, err error) {
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '[' {
		err = json.Unmarshal(body, &calls)
		return calls, true, err
	}
	var one T
	if err := json.Unmarshal(body, &one); err != nil {
		return nil, false, err
	}
	return []T{one}, false, nil
}

// Recorder forwards JSON-RPC requests to a node and records every call.
type Recorder struct {
	node   string
	client *http.Client

	mu    sync.Mutex
	calls []Call
	seen  map[string]struct{}
}

// NewRecorder returns a Recorder in front of the node at url.
func NewRecorder(url string) *Recorder {
	return &Recorder{node: url, client: &http.Client{}, seen: map[string]struct{}{}}
}

// ServeHTTP forwards the request and records its calls.
func (rec *Recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, rec.node, bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := rec.client.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	rec.record(body, answer)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
}

// record pairs the calls of a request with the answers by id.
func (rec *Recorder) record(body, answer []byte) {
	reqs, _, err := decodeBody[request](body)
	if err != nil {
		return
	}
	resps, _, err := decodeBody[response](answer)
	if err != nil {
		return
	}
	byID := make(map[string]response, len(resps))
	for _, r := range resps {
		byID[string(r.ID)] = r
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, q := range reqs {
		a, ok := byID[string(q.ID)]
		if !ok || len(q.ID) == 0 {
			continue
		}
		c := Call{Method: q.Method, Params: q.Params, Result: a.Result, Error: a.Error}
		line, err := json.Marshal(c)
		if err != nil {
			continue
		}
		if _, dup := rec.seen[string(line)]; dup {
			continue
		}
		rec.seen[string(line)] = struct{}{}
		rec.calls = append(rec.calls, c)
	}
}

// Calls returns the calls recorded so far, in order, each distinct call
// and answer once.
func (rec *Recorder) Calls() []Call {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]Call(nil), rec.calls...)
}

// Save writes the calls to path as gzip-compressed JSON lines.
func Save(path string, calls []Call) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	zw := gzip.NewWriter(f)
	enc := json.NewEncoder(zw)
	for _, c := range calls {
		if err := enc.Encode(c); err != nil {
			f.Close()
			return err
		}
	}
	if err := zw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Load reads a transcript written by Save.
func Load(path string) ([]Call, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("rpcreplay: %s: %w", path, err)
	}
	var calls []Call
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		var c Call
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			return nil, fmt.Errorf("rpcreplay: %s: %w", path, err)
		}
		calls = append(calls, c)
	}
	return calls, sc.Err()
}

// Find returns the recorded calls of a method, in order.
func Find(calls []Call, method string) []Call {
	var out []Call
	for _, c := range calls {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// lower is strings.ToLower, for hex comparisons.
var lower = strings.ToLower
