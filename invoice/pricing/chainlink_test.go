package pricing_test

import (
	"context"
	"crypto/ecdsa"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient/simulated"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/evmpaytest/simchain"
	"github.com/evmpay/evmpay/invoice/pricing"
	"github.com/evmpay/evmpay/invoice/pricing/chainlinktest"
)

// chain is go-ethereum's simulated backend with one funded deployer.
type chain struct {
	t      *testing.T
	b      *simchain.Backend
	client simulated.Client
	opts   *bind.TransactOpts
}

func newChain(t *testing.T) *chain {
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	return newChainWith(t, key)
}

func newChainWith(t *testing.T, key *ecdsa.PrivateKey) *chain {
	eth, _ := new(big.Int).SetString("1000000000000000000000", 10)
	b := simchain.New(t, types.GenesisAlloc{crypto.PubkeyToAddress(key.PublicKey): {Balance: eth}})
	return &chain{t: t, b: b, client: b.Client(), opts: bind.NewKeyedTransactor(key, big.NewInt(1337))}
}

// mined commits a block and requires tx to have succeeded.
func (c *chain) mined(tx *types.Transaction, err error) {
	c.t.Helper()
	require.NoError(c.t, err)
	c.b.Commit()
	r, err := c.client.TransactionReceipt(context.Background(), tx.Hash())
	require.NoError(c.t, err)
	require.Equal(c.t, types.ReceiptStatusSuccessful, r.Status)
}

// head is the latest block's time.
func (c *chain) head() time.Time {
	h, err := c.client.HeaderByNumber(context.Background(), nil)
	require.NoError(c.t, err)
	return time.Unix(int64(h.Time), 0).UTC()
}

func (c *chain) mock(decimals uint8, answer int64) *chainlinktest.Feed {
	f, tx, err := chainlinktest.DeployMock(c.opts, c.client, decimals, big.NewInt(answer))
	c.mined(tx, err)
	return f
}

func TestChainlink_ReadsMockV3AggregatorLatestRound(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	feed := c.mock(8, 250_012_345_678) // 2500.12345678 USD per ETH, 8 decimals
	src, err := pricing.NewChainlink(c.client, pricing.ChainlinkConfig{Feeds: []pricing.ChainlinkFeed{
		{Pair: ethUSD, Address: feed.Address, MaxAge: 3600 * time.Second},
	}})
	require.NoError(t, err)
	require.Equal(t, "chainlink", src.Name())
	rates, err := src.Rates(context.Background(), []pricing.Pair{ethUSD, ethEUR})
	require.NoError(t, err)
	require.Len(t, rates, 1)
	require.Equal(t, "2500.12345678", rates[0].Value.String())
	require.Equal(t, c.head(), rates[0].At) // updatedAt: the block that set the answer
	require.Equal(t, time.Hour, rates[0].MaxAge)

	// A new round is read at its own time.
	c.b.AdjustTime(90 * time.Second)
	c.mined(feed.UpdateAnswer(c.opts, big.NewInt(251_000_000_000)))
	rates, err = src.Rates(context.Background(), []pricing.Pair{ethUSD})
	require.NoError(t, err)
	require.Equal(t, "2510", rates[0].Value.String())
	require.Equal(t, c.head(), rates[0].At)
}

func TestChainlink_RefusesNonPositiveAnswers(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	feed := c.mock(8, 100_000_000)
	src, err := pricing.NewChainlink(c.client, pricing.ChainlinkConfig{Feeds: []pricing.ChainlinkFeed{{Pair: ethUSD, Address: feed.Address}}})
	require.NoError(t, err)
	for _, answer := range []int64{0, -250_000_000_000} {
		c.mined(feed.UpdateAnswer(c.opts, big.NewInt(answer)))
		rates, err := src.Rates(context.Background(), []pricing.Pair{ethUSD})
		require.ErrorContains(t, err, "not a positive price")
		require.Empty(t, rates)
	}
}

func TestChainlink_ReadsAnOldRoundAtItsOldTime(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	feed := c.mock(8, 250_000_000_000)
	old := c.head().Add(-3 * time.Hour)
	c.mined(feed.UpdateRoundData(c.opts, 7, big.NewInt(240_000_000_000), uint64(old.Unix()), uint64(old.Unix())))
	src, err := pricing.NewChainlink(c.client, pricing.ChainlinkConfig{Feeds: []pricing.ChainlinkFeed{{Pair: ethUSD, Address: feed.Address}}})
	require.NoError(t, err)
	rates, err := src.Rates(context.Background(), []pricing.Pair{ethUSD})
	require.NoError(t, err)
	require.Equal(t, old, rates[0].At) // the Pricer drops it as stale (TestPricer_ChainlinkStaleFeedDropped)
}

func TestChainlink_RefusesCarriedOverAndIncompleteRounds(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	// MockV3Aggregator always answers answeredInRound = roundId; the
	// scripted aggregator implements Chainlink's interface to say otherwise.
	feed, tx, err := chainlinktest.DeployScripted(c.opts, c.client, 8)
	c.mined(tx, err)
	src, err := pricing.NewChainlink(c.client, pricing.ChainlinkConfig{Name: "cl", Feeds: []pricing.ChainlinkFeed{{Pair: ethUSD, Address: feed.Address}}})
	require.NoError(t, err)
	now := uint64(c.head().Unix())

	c.mined(feed.SetRound(c.opts, 10, big.NewInt(250_000_000_000), now, now, 9))
	_, err = src.Rates(context.Background(), []pricing.Pair{ethUSD})
	require.ErrorContains(t, err, "answeredInRound < roundId")

	c.mined(feed.SetRound(c.opts, 10, big.NewInt(250_000_000_000), now, 0, 10))
	_, err = src.Rates(context.Background(), []pricing.Pair{ethUSD})
	require.ErrorContains(t, err, "not complete")

	c.mined(feed.SetRound(c.opts, 11, big.NewInt(250_000_000_000), now, now, 11))
	rates, err := src.Rates(context.Background(), []pricing.Pair{ethUSD})
	require.NoError(t, err)
	require.Equal(t, "2500", rates[0].Value.String())
}

func TestChainlink_NoContractAtTheAddress(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	src, err := pricing.NewChainlink(c.client, pricing.ChainlinkConfig{Feeds: []pricing.ChainlinkFeed{
		{Pair: ethUSD, Address: common.HexToAddress("0x00000000000000000000000000000000000c0de")},
	}})
	require.NoError(t, err)
	rates, err := src.Rates(context.Background(), []pricing.Pair{ethUSD})
	require.ErrorContains(t, err, "no contract")
	require.Empty(t, rates)
}

func TestNewChainlink_RefusesABadConfiguration(t *testing.T) {
	t.Parallel()
	c := newChain(t)
	a := common.HexToAddress("0x0000000000000000000000000000000000000001")
	for _, cfg := range []pricing.ChainlinkConfig{
		{},
		{Feeds: []pricing.ChainlinkFeed{{Pair: ethUSD}}},
		{Feeds: []pricing.ChainlinkFeed{{Pair: ethUSD, Address: a}, {Pair: ethUSD, Address: a}}},
		{Feeds: []pricing.ChainlinkFeed{{Address: a}}},
	} {
		_, err := pricing.NewChainlink(c.client, cfg)
		require.Error(t, err)
	}
	_, err := pricing.NewChainlink(nil, pricing.ChainlinkConfig{Feeds: []pricing.ChainlinkFeed{{Pair: ethUSD, Address: a}}})
	require.Error(t, err)
}
