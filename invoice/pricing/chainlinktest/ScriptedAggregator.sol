// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

// Chainlink's own mock aggregator, from the @chainlink/contracts npm package
// (scripts/build-contracts.sh pins the version): importing it here makes solc
// emit its ABI and bytecode (MockV3Aggregator.abi.json, .bin) beside this
// file's. The pricing tests deploy it to read real latestRoundData answers.
import {MockV3Aggregator} from "@chainlink/contracts/src/v0.8/shared/mocks/MockV3Aggregator.sol";
import {AggregatorV3Interface} from "@chainlink/contracts/src/v0.8/shared/interfaces/AggregatorV3Interface.sol";

/// @title ScriptedAggregator
/// @notice Answers latestRoundData with exactly the round last set, including
/// rounds MockV3Aggregator cannot produce (its answeredInRound always equals
/// its roundId): a round answered in an earlier round (answeredInRound <
/// roundId) or an incomplete one (updatedAt = 0). Test use only.
contract ScriptedAggregator is AggregatorV3Interface {
    uint8 public override decimals;

    uint80 private roundId;
    int256 private answer;
    uint256 private startedAt;
    uint256 private updatedAt;
    uint80 private answeredInRound;

    constructor(uint8 _decimals) {
        decimals = _decimals;
    }

    function setRound(
        uint80 _roundId,
        int256 _answer,
        uint256 _startedAt,
        uint256 _updatedAt,
        uint80 _answeredInRound
    ) external {
        roundId = _roundId;
        answer = _answer;
        startedAt = _startedAt;
        updatedAt = _updatedAt;
        answeredInRound = _answeredInRound;
    }

    function description() external pure override returns (string memory) {
        return "evmpay ScriptedAggregator";
    }

    function version() external pure override returns (uint256) {
        return 0;
    }

    function getRoundData(uint80) external view override returns (uint80, int256, uint256, uint256, uint80) {
        return (roundId, answer, startedAt, updatedAt, answeredInRound);
    }

    function latestRoundData() external view override returns (uint80, int256, uint256, uint256, uint80) {
        return (roundId, answer, startedAt, updatedAt, answeredInRound);
    }
}
