package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"strconv"
	"strings"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/holiman/uint256"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/sweep"
)

// tokenConfig is one accepted ERC-20 token, as configured: PAY_TOKENS
// ("USDC:0x…:6:permit,…") or the JSON file PAY_TOKENS_FILE
// ([{"symbol":"USDC","address":"0x…","decimals":6,"sweep":"permit"}]).
type tokenConfig struct {
	Symbol  string         `json:"symbol"`
	Address common.Address `json:"-"`
	// Decimals, when set, must equal the contract's decimals(): a wrong
	// value would misprice every invoice.
	Decimals *uint8 `json:"decimals,omitempty"`
	// Sweep is the sweep path; "" detects it (see docs/tokens.md).
	Sweep sweep.TokenPath `json:"sweep,omitempty"`
}

// readTokens reads the accepted tokens from PAY_TOKENS or PAY_TOKENS_FILE
// (not both); none is fine (native coin only).
func readTokens(getenv func(string) string) ([]tokenConfig, error) {
	inline, file := getenv("PAY_TOKENS"), getenv("PAY_TOKENS_FILE")
	var toks []tokenConfig
	var err error
	switch {
	case inline != "" && file != "":
		return nil, errors.New("set PAY_TOKENS or PAY_TOKENS_FILE, not both")
	case inline != "":
		toks, err = parseTokensInline(inline)
		if err != nil {
			return nil, fmt.Errorf("PAY_TOKENS: %w", err)
		}
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("PAY_TOKENS_FILE: %w", err)
		}
		if toks, err = parseTokensJSON(b); err != nil {
			return nil, fmt.Errorf("PAY_TOKENS_FILE %s: %w", file, err)
		}
	}
	return toks, checkTokens(toks)
}

// parseTokensInline reads "SYMBOL:ADDRESS[:DECIMALS[:PATH]]" entries,
// comma-separated.
func parseTokensInline(s string) ([]tokenConfig, error) {
	var out []tokenConfig
	for _, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		parts := strings.Split(entry, ":")
		if len(parts) < 2 || len(parts) > 4 {
			return nil, fmt.Errorf("%q: want SYMBOL:ADDRESS[:DECIMALS[:permit|fund]]", entry)
		}
		t := tokenConfig{Symbol: parts[0]}
		addr, err := store.ParseAddress(parts[1])
		if err != nil {
			return nil, fmt.Errorf("%q: %w", entry, err)
		}
		t.Address = addr
		if len(parts) > 2 && parts[2] != "" {
			d, err := strconv.ParseUint(parts[2], 10, 8)
			if err != nil {
				return nil, fmt.Errorf("%q: decimals %q is not a number from 0 to 77", entry, parts[2])
			}
			dd := uint8(d)
			t.Decimals = &dd
		}
		if len(parts) > 3 {
			t.Sweep = sweep.TokenPath(parts[3])
		}
		out = append(out, t)
	}
	return out, nil
}

func parseTokensJSON(b []byte) ([]tokenConfig, error) {
	var raw []struct {
		tokenConfig
		Address string `json:"address"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("want a JSON array of {\"symbol\", \"address\", \"decimals\" (optional), \"sweep\" (optional)}: %w", err)
	}
	out := make([]tokenConfig, len(raw))
	for i, r := range raw {
		addr, err := store.ParseAddress(r.Address)
		if err != nil {
			return nil, fmt.Errorf("token %q: %w", r.Symbol, err)
		}
		out[i] = r.tokenConfig
		out[i].Address = addr
	}
	return out, nil
}

func checkTokens(toks []tokenConfig) error {
	seen := map[string]bool{}
	for _, t := range toks {
		switch {
		case strings.TrimSpace(t.Symbol) == "":
			return fmt.Errorf("token %s: empty symbol", t.Address.Hex())
		case t.Address == (common.Address{}):
			return fmt.Errorf("token %s: zero address", t.Symbol)
		case t.Decimals != nil && *t.Decimals > store.MaxDecimals:
			return fmt.Errorf("token %s: %d decimals, at most %d", t.Symbol, *t.Decimals, store.MaxDecimals)
		case t.Sweep != "" && t.Sweep != sweep.TokenPathPermit && t.Sweep != sweep.TokenPathFund:
			return fmt.Errorf("token %s: sweep path %q, want permit or fund", t.Symbol, t.Sweep)
		case seen[strings.ToUpper(t.Symbol)] || seen[t.Address.Hex()]:
			return fmt.Errorf("token %s (%s) given twice", t.Symbol, t.Address.Hex())
		}
		seen[strings.ToUpper(t.Symbol)], seen[t.Address.Hex()] = true, true
	}
	return nil
}

// decimalsSelector is the selector of ERC-20's decimals().
var decimalsSelector = []byte{0x31, 0x3c, 0xe5, 0x67}

// totalSupplySelector is the ERC-20 totalSupply() call.
var totalSupplySelector = []byte{0x18, 0x16, 0x0d, 0xdd}

// resolveTokens reads each token's decimals() from the chain at start and
// checks it against the configured value, if any. A token that does not
// answer (no contract there, another chain) stops the process.
func resolveTokens(ctx context.Context, c ethereum.ContractCaller, toks []tokenConfig) ([]store.Asset, map[common.Address]store.Amount, error) {
	out := make([]store.Asset, 0, len(toks))
	supplies := map[common.Address]store.Amount{}
	for _, t := range toks {
		addr := t.Address
		res, err := c.CallContract(ctx, ethereum.CallMsg{To: &addr, Data: decimalsSelector}, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("token %s (%s): decimals(): %w (is it an ERC-20 contract on this chain?)", t.Symbol, addr.Hex(), err)
		}
		if len(res) != 32 {
			return nil, nil, fmt.Errorf("token %s (%s): decimals() returned %d bytes (is it an ERC-20 contract on this chain?)", t.Symbol, addr.Hex(), len(res))
		}
		d := new(big.Int).SetBytes(res)
		if !d.IsUint64() || d.Uint64() > store.MaxDecimals {
			return nil, nil, fmt.Errorf("token %s (%s): decimals() is %s, at most %d", t.Symbol, addr.Hex(), d, store.MaxDecimals)
		}
		if t.Decimals != nil && uint64(*t.Decimals) != d.Uint64() {
			return nil, nil, fmt.Errorf("token %s (%s): configured with %d decimals but the contract says %d: refusing to misprice invoices",
				t.Symbol, addr.Hex(), *t.Decimals, d.Uint64())
		}
		// totalSupply() caps an invoice's amount: more than exists can never
		// be paid. A supply of 0 (nothing minted yet) caps nothing.
		res, err = c.CallContract(ctx, ethereum.CallMsg{To: &addr, Data: totalSupplySelector}, nil)
		if err != nil || len(res) != 32 {
			return nil, nil, fmt.Errorf("token %s (%s): totalSupply(): %v (is it an ERC-20 contract on this chain?)", t.Symbol, addr.Hex(), err)
		}
		if supply := new(big.Int).SetBytes(res); supply.Sign() > 0 {
			v, _ := uint256.FromBig(supply)
			supplies[addr] = store.AmountFromUint256(v)
		}
		out = append(out, store.Asset{Symbol: t.Symbol, Address: &addr, Decimals: uint8(d.Uint64())})
	}
	return out, supplies, nil
}

// tokenPaths is the sweep paths configured per token.
func tokenPaths(toks []tokenConfig) map[common.Address]sweep.TokenPath {
	m := map[common.Address]sweep.TokenPath{}
	for _, t := range toks {
		if t.Sweep != "" {
			m[t.Address] = t.Sweep
		}
	}
	return m
}
