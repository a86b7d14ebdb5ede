package invoice

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"slices"

	"github.com/ethereum/go-ethereum/common"

	"github.com/evmpay/evmpay/store"
	"github.com/evmpay/evmpay/store/problem"
)

// CodeReader reads the code at an address: the one method of go-ethereum's
// ethereum.ChainStateReader that the settlement-address check needs.
// *ethclient.Client and simulated.Client satisfy it.
type CodeReader interface {
	CodeAt(ctx context.Context, account common.Address, blockNumber *big.Int) ([]byte, error)
}

// DepositAddresses tells whether an address is one of the service's
// deposit addresses. store.Store satisfies it.
type DepositAddresses interface {
	IsDepositAddress(ctx context.Context, addr common.Address) (bool, error)
}

// MerchantRules are what a merchant's webhook_url and settlement_address
// must pass beyond their syntax, at creation (admin API, `payd merchants
// create`, CreateMerchant) and at every update. A refusal is a 422 problem
// naming the field. The zero value adds no check.
type MerchantRules struct {
	// WebhookHost refuses a webhook_url whose host (url.URL.Hostname: no
	// port, no brackets) it returns an error for. payd passes
	// webhook.CheckPublicHost when private networks are refused (the
	// `serve` default), so that a private address literal is refused at
	// once instead of failing every delivery; the webhook dialer still
	// checks every address it dials (a name may resolve anywhere). Defaults
	// to nil: any host.
	WebhookHost func(host string) error
	// ServiceAddresses are the addresses the service holds keys for besides
	// deposit addresses (the sweep wallet, the gas funder): never accepted
	// as settlement_address, like every deposit address (looked up in the
	// store). Defaults to none.
	ServiceAddresses []common.Address
	// Chain, when set, is asked for the code at a new settlement_address:
	// an address with code (a contract) is refused, because sweeps are
	// plain 21,000-gas transfers that a contract's receive logic would make
	// fail (the sweeper refuses contracts too). A chain that does not
	// answer makes the change fail with 503 (nothing is written). Defaults
	// to nil: no contract check.
	Chain CodeReader
}

// errChainUnavailable wraps a failed CodeAt: the check could not be made.
var errChainUnavailable = errors.New("invoice: the chain node did not answer")

// check applies the rules to the webhook URL and settlement address a
// create or update sets (nil: not changed).
func (r MerchantRules) check(ctx context.Context, st DepositAddresses, webhookURL *string, settlement *common.Address) error {
	if webhookURL != nil && *webhookURL != "" && r.WebhookHost != nil {
		u, err := url.Parse(*webhookURL)
		if err != nil {
			return &invalidMerchant{field: "webhook_url", reason: "an absolute http(s) URL"}
		}
		if err := r.WebhookHost(u.Hostname()); err != nil {
			return &invalidMerchant{field: "webhook_url", code: problem.CodeWebhookNotPublic,
				detail: fmt.Sprintf("webhook_url's host %q is refused: %v; webhooks are delivered only to public hosts", u.Hostname(), err)}
		}
	}
	if settlement == nil {
		return nil
	}
	a := *settlement
	reserved := &invalidMerchant{field: "settlement_address", code: problem.CodeSettlementService,
		detail: "settlement_address " + a.Hex() + " is an address this service holds the key of (a deposit address, the sweep wallet or the gas funder); payouts sent there would be credited to nothing. Use a wallet of your own"}
	if slices.Contains(r.ServiceAddresses, a) {
		return reserved
	}
	deposit, err := st.IsDepositAddress(ctx, a)
	if err != nil {
		return err
	}
	if deposit {
		return reserved
	}
	if r.Chain != nil {
		code, err := r.Chain.CodeAt(ctx, a, nil)
		if err != nil {
			return fmt.Errorf("%w: code at settlement address: %w", errChainUnavailable, err)
		}
		if len(code) > 0 {
			return &invalidMerchant{field: "settlement_address", code: problem.CodeSettlementIsCode,
				detail: "settlement_address " + a.Hex() + " is a contract: sweeps are plain transfers with 21,000 gas, which a contract's receive logic makes fail, so funds would stay at the deposit address. Use an externally owned account (a plain wallet address)"}
		}
	}
	return nil
}

var _ DepositAddresses = store.Store(nil)
