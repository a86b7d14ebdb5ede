// Package chainlinktest deploys Chainlink price feeds on a test chain (the
// simulated backend, the payd dev chain) for the pricing tests:
//
//   - MockV3Aggregator: Chainlink's own mock aggregator, from the
//     @chainlink/contracts npm package (version pinned in
//     scripts/build-contracts.sh). Its latestRoundData is what every
//     AggregatorV3Interface answers; updateAnswer starts a round at the
//     block's time, updateRoundData sets any round.
//   - ScriptedAggregator (ScriptedAggregator.sol beside this file): answers
//     exactly the round last set, including what the mock cannot produce
//     (answeredInRound < roundId, updatedAt 0).
//
// The ABI and bytecode are committed beside the Solidity source that
// imports the mock; scripts/build-contracts.sh rebuilds them with a pinned
// solc from npm.
package chainlinktest

import (
	_ "embed"
	"fmt"
	"math/big"
	"strings"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
)

var (
	//go:embed MockV3Aggregator.abi.json
	mockABI string
	//go:embed MockV3Aggregator.bin
	mockBin string
	//go:embed ScriptedAggregator.abi.json
	scriptedABI string
	//go:embed ScriptedAggregator.bin
	scriptedBin string
)

type kind struct {
	abi      abi.ABI
	bytecode []byte
}

func mustKind(name, abiJSON, bin string) kind {
	parsed, err := abi.JSON(strings.NewReader(abiJSON))
	if err != nil {
		panic(fmt.Sprintf("chainlinktest: %s ABI: %v", name, err))
	}
	return kind{abi: parsed, bytecode: common.FromHex(strings.TrimSpace(bin))}
}

var (
	mock     = mustKind("MockV3Aggregator", mockABI, mockBin)
	scripted = mustKind("ScriptedAggregator", scriptedABI, scriptedBin)
)

// Feed is a deployed aggregator.
type Feed struct {
	Address common.Address
	bc      *bind.BoundContract
}

// withGas returns opts with gas set when the caller left it to estimation:
// go-ethereum v1.17.10's simulated backend estimated 736,460 gas for the
// mock's creation, which then used 1,053,263 and failed out of gas.
func withGas(opts *bind.TransactOpts, gas uint64) *bind.TransactOpts {
	if opts.GasLimit != 0 {
		return opts
	}
	o := *opts
	o.GasLimit = gas
	return &o
}

func deploy(opts *bind.TransactOpts, backend bind.ContractBackend, k kind, args ...any) (*Feed, *types.Transaction, error) {
	input, err := k.abi.Pack("", args...)
	if err != nil {
		return nil, nil, fmt.Errorf("chainlinktest: pack constructor: %w", err)
	}
	addr, tx, err := bind.DeployContract(withGas(opts, 3_000_000), k.bytecode, backend, input)
	if err != nil {
		return nil, nil, fmt.Errorf("chainlinktest: deploy: %w", err)
	}
	return &Feed{Address: addr, bc: bind.NewBoundContract(addr, k.abi, backend, backend, backend)}, tx, nil
}

// DeployMock sends the creation of Chainlink's MockV3Aggregator with
// decimals and a first answer (round 1, updated at the creation block's
// time). It exists once the transaction is mined.
func DeployMock(opts *bind.TransactOpts, backend bind.ContractBackend, decimals uint8, answer *big.Int) (*Feed, *types.Transaction, error) {
	return deploy(opts, backend, mock, decimals, answer)
}

// UpdateAnswer starts the mock's next round with answer at the block's
// time (MockV3Aggregator only).
func (f *Feed) UpdateAnswer(opts *bind.TransactOpts, answer *big.Int) (*types.Transaction, error) {
	return f.bc.Transact(withGas(opts, 1_000_000), "updateAnswer", answer)
}

// UpdateRoundData sets the mock's latest round outright (MockV3Aggregator
// only): an old updatedAt makes a stale feed.
func (f *Feed) UpdateRoundData(opts *bind.TransactOpts, roundID uint64, answer *big.Int, updatedAt, startedAt uint64) (*types.Transaction, error) {
	return f.bc.Transact(withGas(opts, 1_000_000), "updateRoundData", new(big.Int).SetUint64(roundID), answer,
		new(big.Int).SetUint64(updatedAt), new(big.Int).SetUint64(startedAt))
}

// DeployScripted sends the creation of a ScriptedAggregator with decimals
// and no round yet.
func DeployScripted(opts *bind.TransactOpts, backend bind.ContractBackend, decimals uint8) (*Feed, *types.Transaction, error) {
	return deploy(opts, backend, scripted, decimals)
}

// SetRound sets the round a ScriptedAggregator answers.
func (f *Feed) SetRound(opts *bind.TransactOpts, roundID uint64, answer *big.Int, startedAt, updatedAt, answeredInRound uint64) (*types.Transaction, error) {
	u := func(v uint64) *big.Int { return new(big.Int).SetUint64(v) }
	return f.bc.Transact(withGas(opts, 1_000_000), "setRound", u(roundID), answer, u(startedAt), u(updatedAt), u(answeredInRound))
}
