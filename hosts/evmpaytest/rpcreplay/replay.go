package rpcreplay

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Replayer answers JSON-RPC requests from a transcript, as a node whose
// chain stopped at Head.
type Replayer struct {
	head  uint64
	exact map[string]Call
	// Blocks by the number asked for (a node may answer another: evmd
	// answers a request for block 0 with block 1), full and header-only.
	full, header map[uint64]json.RawMessage
	// logs holds eth_getLogs answers by block hash.
	logs map[string][]json.RawMessage
}

// NewReplayer returns a Replayer of calls whose chain head is head: blocks
// above it do not exist, eth_blockNumber answers it.
func NewReplayer(calls []Call, head uint64) (*Replayer, error) {
	rp := &Replayer{head: head, exact: map[string]Call{}, full: map[uint64]json.RawMessage{},
		header: map[uint64]json.RawMessage{}, logs: map[string][]json.RawMessage{}}
	for _, c := range calls {
		rp.exact[key(c.Method, c.Params)] = c
		switch c.Method {
		case "eth_getBlockByNumber":
			n, full, ok := blockArgs(c.Params)
			if !ok || c.Error != nil || string(c.Result) == "null" || len(c.Result) == 0 {
				continue
			}
			if full {
				rp.full[n] = c.Result
			} else {
				rp.header[n] = c.Result
			}
		case "eth_getLogs":
			var args []struct {
				BlockHash string `json:"blockHash"`
			}
			if json.Unmarshal(c.Params, &args) != nil || len(args) != 1 || args[0].BlockHash == "" || c.Error != nil {
				continue
			}
			var logs []json.RawMessage
			if err := json.Unmarshal(c.Result, &logs); err != nil {
				return nil, fmt.Errorf("rpcreplay: eth_getLogs answer: %w", err)
			}
			h := lower(args[0].BlockHash)
			rp.logs[h] = mergeLogs(rp.logs[h], logs)
		}
	}
	return rp, nil
}

// blockArgs reads eth_getBlockByNumber's [number, full] with a hex number.
func blockArgs(params json.RawMessage) (n uint64, full bool, ok bool) {
	var args []json.RawMessage
	if json.Unmarshal(params, &args) != nil || len(args) != 2 {
		return 0, false, false
	}
	var tag string
	if json.Unmarshal(args[0], &tag) != nil || json.Unmarshal(args[1], &full) != nil {
		return 0, false, false
	}
	n, err := strconv.ParseUint(strings.TrimPrefix(tag, "0x"), 16, 64)
	if err != nil || !strings.HasPrefix(tag, "0x") {
		return 0, false, false
	}
	return n, full, true
}

// mergeLogs adds the logs of b that a lacks (answers of differently
// filtered queries of one block).
func mergeLogs(a, b []json.RawMessage) []json.RawMessage {
	seen := make(map[string]bool, len(a))
	for _, l := range a {
		seen[string(l)] = true
	}
	for _, l := range b {
		if !seen[string(l)] {
			a = append(a, l)
		}
	}
	return a
}

// ServeHTTP answers a JSON-RPC request or batch.
func (rp *Replayer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	reqs, batch, err := decodeBody[request](body)
	if err != nil {
		http.Error(w, "rpcreplay: not JSON-RPC: "+err.Error(), http.StatusBadRequest)
		return
	}
	out := make([]response, len(reqs))
	for i, q := range reqs {
		res, rpcErr := rp.answer(q.Method, q.Params)
		out[i] = response{JSONRPC: "2.0", ID: q.ID, Result: res, Error: rpcErr}
		if rpcErr == nil && len(res) == 0 {
			out[i].Result = json.RawMessage("null")
		}
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	if batch {
		_ = enc.Encode(out)
		return
	}
	_ = enc.Encode(out[0])
}

// answer is what the recorded node said to a call.
func (rp *Replayer) answer(method string, params json.RawMessage) (json.RawMessage, *Error) {
	switch method {
	case "eth_blockNumber":
		return json.RawMessage(strconv.Quote("0x" + strconv.FormatUint(rp.head, 16))), nil
	case "eth_getBlockByNumber":
		return rp.block(params)
	case "eth_getLogs":
		if res, ok := rp.blockLogs(params); ok {
			return res, nil
		}
	}
	c, ok := rp.exact[key(method, params)]
	if !ok {
		return nil, &Error{Code: -32601, Message: fmt.Sprintf("rpcreplay: %s %s is not in the transcript; record it again", method, params)}
	}
	return c.Result, c.Error
}

func (rp *Replayer) block(params json.RawMessage) (json.RawMessage, *Error) {
	var args []json.RawMessage
	var tag string
	var full bool
	if json.Unmarshal(params, &args) != nil || len(args) != 2 ||
		json.Unmarshal(args[0], &tag) != nil || json.Unmarshal(args[1], &full) != nil {
		return nil, &Error{Code: -32602, Message: "rpcreplay: eth_getBlockByNumber takes [number, full]"}
	}
	var n uint64
	switch tag {
	case "latest", "safe", "finalized", "pending":
		n = rp.head
	default:
		v, err := strconv.ParseUint(strings.TrimPrefix(tag, "0x"), 16, 64)
		if err != nil {
			return nil, &Error{Code: -32602, Message: "rpcreplay: bad block number " + tag}
		}
		n = v
	}
	if n > rp.head {
		return json.RawMessage("null"), nil
	}
	if full {
		if b, ok := rp.full[n]; ok {
			return b, nil
		}
		if h, ok := rp.header[n]; ok && noTransactions(h) {
			return h, nil
		}
	} else {
		if h, ok := rp.header[n]; ok {
			return h, nil
		}
		if b, ok := rp.full[n]; ok {
			return headerOf(b)
		}
	}
	return nil, &Error{Code: -32601, Message: fmt.Sprintf("rpcreplay: block %d (full %t) is not in the transcript; record it again", n, full)}
}

// noTransactions reports whether a block has an empty transaction list,
// whose header-only and full forms are the same.
func noTransactions(b json.RawMessage) bool {
	var v struct {
		Transactions []json.RawMessage `json:"transactions"`
	}
	return json.Unmarshal(b, &v) == nil && len(v.Transactions) == 0
}

// headerOf turns a block with full transactions into the header-only form
// nodes answer to eth_getBlockByNumber(n, false): transaction hashes.
func headerOf(full json.RawMessage) (json.RawMessage, *Error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(full, &m); err != nil {
		return nil, &Error{Code: -32603, Message: "rpcreplay: recorded block: " + err.Error()}
	}
	var txs []struct {
		Hash json.RawMessage `json:"hash"`
	}
	if err := json.Unmarshal(m["transactions"], &txs); err != nil {
		return nil, &Error{Code: -32603, Message: "rpcreplay: recorded transactions: " + err.Error()}
	}
	hashes := make([]json.RawMessage, len(txs))
	for i, t := range txs {
		hashes[i] = t.Hash
	}
	m["transactions"], _ = json.Marshal(hashes)
	out, err := json.Marshal(m)
	if err != nil {
		return nil, &Error{Code: -32603, Message: err.Error()}
	}
	return out, nil
}

// blockLogs answers eth_getLogs by block hash from the recorded logs of
// that block, filtered by the addresses and topics asked for.
func (rp *Replayer) blockLogs(params json.RawMessage) (json.RawMessage, bool) {
	var args []struct {
		BlockHash string            `json:"blockHash"`
		Address   json.RawMessage   `json:"address"`
		Topics    []json.RawMessage `json:"topics"`
	}
	if json.Unmarshal(params, &args) != nil || len(args) != 1 || args[0].BlockHash == "" {
		return nil, false
	}
	logs, ok := rp.logs[lower(args[0].BlockHash)]
	if !ok {
		return nil, false
	}
	addrs := oneOrMany(args[0].Address)
	topics := make([]map[string]bool, len(args[0].Topics))
	for i, t := range args[0].Topics {
		topics[i] = oneOrMany(t)
	}
	out := []json.RawMessage{}
	for _, l := range logs {
		var v struct {
			Address string   `json:"address"`
			Topics  []string `json:"topics"`
		}
		if json.Unmarshal(l, &v) != nil {
			continue
		}
		if addrs != nil && !addrs[lower(v.Address)] {
			continue
		}
		match := true
		for i, want := range topics {
			if want != nil && (i >= len(v.Topics) || !want[lower(v.Topics[i])]) {
				match = false
				break
			}
		}
		if match {
			out = append(out, l)
		}
	}
	b, _ := json.Marshal(out)
	return b, true
}

// oneOrMany reads a filter position: null (anything: nil), a string, or
// an array of strings, as a set of lowercase values.
func oneOrMany(raw json.RawMessage) map[string]bool {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var many []string
	if json.Unmarshal(raw, &many) != nil {
		var one string
		if json.Unmarshal(raw, &one) != nil {
			return map[string]bool{}
		}
		many = []string{one}
	}
	set := make(map[string]bool, len(many))
	for _, s := range many {
		set[lower(s)] = true
	}
	return set
}
