package pricing

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"

	"github.com/evmpay/evmpay/store"
)

// ChainlinkFeed is one Chainlink price feed: the AggregatorV3Interface
// proxy at Address answers Pair (the ETH/USD feed answers US dollars per
// ether).
type ChainlinkFeed struct {
	Pair    Pair
	Address common.Address
	// MaxAge is how long after its updatedAt the feed's answer may be used:
	// the feed's heartbeat (an hour for ETH/USD on Ethereum mainnet, a day
	// for most stablecoin feeds) plus a margin. Defaults to the Pricer's
	// Config.MaxAge.
	MaxAge time.Duration
}

// ChainlinkConfig configures NewChainlink.
type ChainlinkConfig struct {
	// Name is the source's name. Defaults to "chainlink".
	Name string
	// Feeds are the feeds read. Required.
	Feeds []ChainlinkFeed
}

// Chainlink reads Chainlink price feeds on chain: latestRoundData and
// decimals of AggregatorV3Interface through eth_call. A round is refused
// when its answer is not positive, when it was answered in an earlier round
// than its own (answeredInRound < roundId: a carried-over answer) or when it
// is incomplete (updatedAt 0). The rate is observed at updatedAt.
type Chainlink struct {
	name   string
	caller ethereum.ContractCaller
	feeds  map[Pair]ChainlinkFeed

	mu       sync.Mutex
	decimals map[common.Address]uint8
}

// aggregatorABI is the part of Chainlink's AggregatorV3Interface read here.
var aggregatorABI = func() abi.ABI {
	a, err := abi.JSON(strings.NewReader(`[
	 {"type":"function","name":"decimals","stateMutability":"view","inputs":[],"outputs":[{"name":"","type":"uint8"}]},
	 {"type":"function","name":"latestRoundData","stateMutability":"view","inputs":[],"outputs":[
	  {"name":"roundId","type":"uint80"},{"name":"answer","type":"int256"},{"name":"startedAt","type":"uint256"},
	  {"name":"updatedAt","type":"uint256"},{"name":"answeredInRound","type":"uint80"}]}]`))
	if err != nil {
		panic(err)
	}
	return a
}()

// NewChainlink returns a source reading cfg.Feeds through caller
// (*ethclient.Client, or the simulated backend's client).
func NewChainlink(caller ethereum.ContractCaller, cfg ChainlinkConfig) (*Chainlink, error) {
	if caller == nil {
		return nil, errors.New("pricing: chainlink: no contract caller")
	}
	if len(cfg.Feeds) == 0 {
		return nil, errors.New("pricing: chainlink: no feeds")
	}
	c := &Chainlink{name: cmp.Or(cfg.Name, "chainlink"), caller: caller,
		feeds: map[Pair]ChainlinkFeed{}, decimals: map[common.Address]uint8{}}
	for _, f := range cfg.Feeds {
		if f.Pair.Base == "" || f.Pair.Quote == "" || f.Address == (common.Address{}) || f.MaxAge < 0 {
			return nil, fmt.Errorf("pricing: chainlink: feed %s at %s: want a pair, an address and a non-negative MaxAge", f.Pair, f.Address.Hex())
		}
		if _, dup := c.feeds[f.Pair]; dup {
			return nil, fmt.Errorf("pricing: chainlink: two feeds for %s", f.Pair)
		}
		c.feeds[f.Pair] = f
	}
	return c, nil
}

// Name implements Source.
func (c *Chainlink) Name() string { return c.name }

// QuotesPair implements PairQuoter: the pairs of its feeds.
func (c *Chainlink) QuotesPair(p Pair) bool {
	_, ok := c.feeds[p]
	return ok
}

// Rates implements Source: one feed after the other.
func (c *Chainlink) Rates(ctx context.Context, pairs []Pair) ([]Rate, error) {
	var out []Rate
	var errs []error
	for _, p := range pairs {
		f, ok := c.feeds[p]
		if !ok {
			continue
		}
		r, err := c.read(ctx, f)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s (%s): %w", c.name, p, f.Address.Hex(), err))
			continue
		}
		out = append(out, r)
	}
	return out, errors.Join(errs...)
}

func (c *Chainlink) read(ctx context.Context, f ChainlinkFeed) (Rate, error) {
	dec, err := c.feedDecimals(ctx, f.Address)
	if err != nil {
		return Rate{}, err
	}
	out, err := c.call(ctx, f.Address, "latestRoundData")
	if err != nil {
		return Rate{}, err
	}
	roundID, answer, updatedAt, answeredIn := out[0].(*big.Int), out[1].(*big.Int), out[3].(*big.Int), out[4].(*big.Int)
	switch {
	case answer.Sign() <= 0:
		return Rate{}, fmt.Errorf("round %s answered %s: not a positive price", roundID, answer)
	case answeredIn.Cmp(roundID) < 0:
		return Rate{}, fmt.Errorf("round %s carries the answer of round %s (answeredInRound < roundId)", roundID, answeredIn)
	case updatedAt.Sign() == 0:
		return Rate{}, fmt.Errorf("round %s is not complete (updatedAt 0)", roundID)
	case !updatedAt.IsInt64():
		return Rate{}, fmt.Errorf("round %s: updatedAt %s is not a time", roundID, updatedAt)
	}
	v, err := store.NewDecimal(answer, dec)
	if err != nil {
		return Rate{}, fmt.Errorf("answer %s with %d decimals: %w", answer, dec, err)
	}
	return Rate{Pair: f.Pair, Value: v, At: time.Unix(updatedAt.Int64(), 0).UTC(), MaxAge: f.MaxAge}, nil
}

// feedDecimals reads decimals() once per feed (it never changes).
func (c *Chainlink) feedDecimals(ctx context.Context, addr common.Address) (uint8, error) {
	c.mu.Lock()
	d, ok := c.decimals[addr]
	c.mu.Unlock()
	if ok {
		return d, nil
	}
	out, err := c.call(ctx, addr, "decimals")
	if err != nil {
		return 0, err
	}
	d = out[0].(uint8)
	if d > store.MaxDecimalScale {
		return 0, fmt.Errorf("decimals() is %d, at most %d", d, store.MaxDecimalScale)
	}
	c.mu.Lock()
	c.decimals[addr] = d
	c.mu.Unlock()
	return d, nil
}

func (c *Chainlink) call(ctx context.Context, addr common.Address, method string) ([]any, error) {
	data, err := aggregatorABI.Pack(method)
	if err != nil {
		return nil, err
	}
	res, err := c.caller.CallContract(ctx, ethereum.CallMsg{To: &addr, Data: data}, nil)
	if err != nil {
		return nil, fmt.Errorf("eth_call %s: %w", method, err)
	}
	if len(res) == 0 {
		return nil, fmt.Errorf("eth_call %s: empty answer (no contract at the address?)", method)
	}
	out, err := aggregatorABI.Unpack(method, res)
	if err != nil {
		return nil, fmt.Errorf("eth_call %s: %w", method, err)
	}
	return out, nil
}
