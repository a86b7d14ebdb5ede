// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import "./StableToken.sol";

/// @title PermitLookalike: a test ERC-20 that looks like EIP-2612 — it answers
/// DOMAIN_SEPARATOR() and nonces(address) — but whose permit always reverts,
/// as some tokens' do.
/// @notice Test infrastructure only.
contract PermitLookalike is StableToken {
    constructor(string memory name_, string memory symbol_, uint8 decimals_) StableToken(name_, symbol_, decimals_) {}

    function permit(address, address, uint256, uint256, uint8, bytes32, bytes32) external pure override {
        revert("permit not supported");
    }
}
