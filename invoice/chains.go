package invoice

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/ethereum/go-ethereum/common"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/problem"
)

// Chain is a chain besides New's on which the Service creates invoices: a
// create request names it in "chain_id" (docs/chains.md). An invoice's
// deposit address is the same on every chain (the derivation does not
// depend on it); its payment URI, its confirmations and its refunds are
// its chain's.
type Chain struct {
	// ID is the EIP-155 chain id. Required; each chain once, and not
	// New's.
	ID uint64
	// Assets, TokenMaxAmounts, Confirmations and Finality are this chain's
	// Config.Assets, Config.TokenMaxAmounts, Config.Confirmations and
	// Config.Finality, with the same defaults (the native coin only, "ETH";
	// depth finality with 12 confirmations).
	Assets          []store.Asset
	TokenMaxAmounts map[common.Address]store.Amount
	Confirmations   int
	Finality        string
}

// chain is one chain the Service serves: New's (Service.home) or one of
// Config.Chains.
type chain struct {
	id uint64
	// st is the store bound to this chain (a store that holds several
	// chains): its reads of the index and the refunds it records are this
	// chain's.
	st            Store
	assets        *assetSet
	tokenMax      map[common.Address]store.Amount
	confirmations int
	finality      string
}

// bindChain is st bound to chain id when st holds several chains
// (store.Store does), else st.
func bindChain(st Store, id uint64) Store {
	if b, ok := st.(interface{ Chain(uint64) store.Store }); ok {
		return b.Chain(id)
	}
	return st
}

// newChains builds the Service's chains: New's first, then Config.Chains.
func newChains(st Store, home uint64, cfg Config) ([]*chain, error) {
	specs := append([]Chain{{ID: home, Assets: cfg.Assets, TokenMaxAmounts: cfg.TokenMaxAmounts,
		Confirmations: cfg.Confirmations, Finality: cfg.Finality}}, cfg.Chains...)
	out := make([]*chain, 0, len(specs))
	for i, c := range specs {
		where := "Chains[" + strconv.Itoa(i-1) + "]"
		if i == 0 {
			where = "New"
		}
		if c.ID == 0 {
			return nil, fmt.Errorf("invoice: %s: chain id must not be zero", where)
		}
		if slices.ContainsFunc(out, func(o *chain) bool { return o.id == c.ID }) {
			return nil, fmt.Errorf("invoice: %s: chain %d given twice", where, c.ID)
		}
		if err := store.CheckFinality(c.Finality, c.Confirmations); err != nil {
			return nil, fmt.Errorf("invoice: %s: %w", where, err)
		}
		if store.FinalityCountsConfirmations(c.Finality) {
			c.Confirmations = cmp.Or(c.Confirmations, 12)
			if c.Confirmations < 1 {
				return nil, fmt.Errorf("invoice: %s: Confirmations must be positive", where)
			}
		}
		assets, err := newAssetSet(c.Assets)
		if err != nil {
			return nil, fmt.Errorf("invoice: %s: %w", where, err)
		}
		out = append(out, &chain{id: c.ID, st: bindChain(st, c.ID), assets: assets, tokenMax: c.TokenMaxAmounts,
			confirmations: c.Confirmations, finality: c.Finality})
	}
	return out, nil
}

// homeChain is New's chain.
func (s *Service) homeChain() *chain { return s.chains[0] }

// chainOf is the chain of an invoice or outbound on chain id: a configured
// one, else (a record another deployment's configuration made) New's
// settings on that chain's data.
func (s *Service) chainOf(id uint64) *chain {
	if c, ok := s.configuredChain(id); ok {
		return c
	}
	c := *s.homeChain()
	c.id, c.st = id, bindChain(s.st, id)
	return &c
}

// configuredChain is chain id when the Service creates invoices on it.
func (s *Service) configuredChain(id uint64) (*chain, bool) {
	for _, c := range s.chains {
		if c.id == id {
			return c, true
		}
	}
	return nil, false
}

// ChainIDs returns the chains invoices may be created on, New's first.
func (s *Service) ChainIDs() []uint64 {
	out := make([]uint64, len(s.chains))
	for i, c := range s.chains {
		out[i] = c.id
	}
	return out
}

// ChainAssets returns the assets invoices on chain id may be for, the
// native coin first, and whether the Service creates invoices there.
func (s *Service) ChainAssets(id uint64) ([]store.Asset, bool) {
	c, ok := s.configuredChain(id)
	if !ok {
		return nil, false
	}
	return slices.Clone(c.assets.list), true
}

// parseChain reads the optional "chain_id" member: absent or null is New's
// chain. It is a JSON number, as chain_id is in responses (a string of
// digits is accepted too: some clients send every id as one).
func (s *Service) parseChain(raw json.RawMessage) (*chain, *problem.Problem) {
	if isNull(raw) {
		return s.homeChain(), nil
	}
	text := string(raw)
	if raw[0] == '"' {
		if json.Unmarshal(raw, &text) != nil {
			text = ""
		}
	}
	id, err := strconv.ParseUint(text, 10, 64)
	if err != nil || id == 0 || strings.HasPrefix(text, "0") || strings.HasPrefix(text, "+") {
		return nil, problem.OfField(problem.CodeInvalidField, "chain_id",
			"chain_id must be an EIP-155 chain id: a positive integer, e.g. 1337")
	}
	c, ok := s.configuredChain(id)
	if !ok {
		ids := make([]string, 0, len(s.chains))
		for _, id := range s.ChainIDs() {
			ids = append(ids, strconv.FormatUint(id, 10))
		}
		return nil, problem.OfField(problem.CodeUnknownChain, "chain_id",
			fmt.Sprintf("chain %d is not served here (chains: %s)", id, strings.Join(ids, ", ")))
	}
	return c, nil
}
