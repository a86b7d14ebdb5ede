package main

import (
	"context"
	"math/big"
	"os"
	"path/filepath"
	"testing"

	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hosts/evmpaytest/simchain"
	"github.com/evmpay/evmpay/hosts/evmpaytest/testtoken"
	"github.com/evmpay/evmpay/sweep"
)

const usdcHex = "0x5FbDB2315678afecb367f032d93F642f64180aa3"

func TestServe_TokensFromEnvironment_Parsed(t *testing.T) {
	t.Parallel()
	e, err := readServeEnv(envOf(map[string]string{"DATABASE_URL": "x", "RPC_URL": "y",
		"PAY_TOKENS": "USDC:" + usdcHex + ":6:permit, USDT:0xdac17f958d2ee523a2206206994597c13d831ec7::fund,DAI:0x6B175474E89094C44Da98b954EedeAC495271d0F"}))
	require.NoError(t, err)
	require.Len(t, e.tokens, 3)
	require.Equal(t, "USDC", e.tokens[0].Symbol)
	require.Equal(t, common.HexToAddress(usdcHex), e.tokens[0].Address)
	require.EqualValues(t, 6, *e.tokens[0].Decimals)
	require.Equal(t, sweep.TokenPathPermit, e.tokens[0].Sweep)
	require.Nil(t, e.tokens[1].Decimals, "decimals left to the contract")
	require.Equal(t, sweep.TokenPathFund, e.tokens[1].Sweep)
	require.Equal(t, sweep.TokenPath(""), e.tokens[2].Sweep, "path detected")
}

func TestServe_TokensFromFile_Parsed(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "tokens.json")
	require.NoError(t, os.WriteFile(file, []byte(`[{"symbol":"USDC","address":"`+usdcHex+`","decimals":6,"sweep":"permit"}]`), 0o600))
	e, err := readServeEnv(envOf(map[string]string{"DATABASE_URL": "x", "RPC_URL": "y", "PAY_TOKENS_FILE": file}))
	require.NoError(t, err)
	require.Len(t, e.tokens, 1)
	require.Equal(t, common.HexToAddress(usdcHex), e.tokens[0].Address)
}

func TestServe_BadTokens_RefusedWithReason(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "tokens.json")
	require.NoError(t, os.WriteFile(file, []byte(`[{"symbol":"USDC","adress":"`+usdcHex+`"}]`), 0o600))
	for env, want := range map[string]string{
		"USDC":        "want SYMBOL:ADDRESS",
		"USDC:0x1234": "0x followed by 40 hex digits",
		"USDC:0x5FbDB2315678afecb367f032d93F642f64180AA3": "checksum",
		"USDC:" + usdcHex + ":x":                          "decimals",
		"USDC:" + usdcHex + ":6:free":                     "want permit or fund",
		"USDC:" + usdcHex + ",usdc:" + usdcHex:            "given twice",
	} {
		_, err := readServeEnv(envOf(map[string]string{"DATABASE_URL": "x", "RPC_URL": "y", "PAY_TOKENS": env}))
		require.ErrorContains(t, err, want, env)
	}
	_, err := readServeEnv(envOf(map[string]string{"DATABASE_URL": "x", "RPC_URL": "y", "PAY_TOKENS_FILE": file}))
	require.ErrorContains(t, err, "unknown field")
	_, err = readServeEnv(envOf(map[string]string{"DATABASE_URL": "x", "RPC_URL": "y", "PAY_TOKENS_FILE": file, "PAY_TOKENS": "A:" + usdcHex}))
	require.ErrorContains(t, err, "not both")
}

func TestResolveTokens_DecimalsReadFromTheContractAndChecked(t *testing.T) {
	t.Parallel()
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	sim := simchain.New(t, types.GenesisAlloc{crypto.PubkeyToAddress(key.PublicKey): {Balance: big.NewInt(1e18)}})
	tok, _, err := testtoken.Deploy(bind.NewKeyedTransactor(key, big.NewInt(1337)), sim.Client(), testtoken.Stable, "X", "X", 6)
	require.NoError(t, err)
	sim.Commit()
	ctx := context.Background()

	assets, supplies, err := resolveTokens(ctx, sim.Client(), []tokenConfig{{Symbol: "USDC", Address: tok.Address}})
	require.NoError(t, err)
	require.EqualValues(t, 6, assets[0].Decimals, "read from decimals()")
	require.Equal(t, tok.Address, *assets[0].Address)
	require.Empty(t, supplies, "nothing minted yet: no cap from the supply")
	_, err = tok.Mint(bind.NewKeyedTransactor(key, big.NewInt(1337)), crypto.PubkeyToAddress(key.PublicKey), big.NewInt(7_000_001))
	require.NoError(t, err)
	sim.Commit()
	_, supplies, err = resolveTokens(ctx, sim.Client(), []tokenConfig{{Symbol: "USDC", Address: tok.Address}})
	require.NoError(t, err)
	require.Equal(t, "7000001", supplies[tok.Address].String(), "read from totalSupply()")

	six, eighteen := uint8(6), uint8(18)
	_, _, err = resolveTokens(ctx, sim.Client(), []tokenConfig{{Symbol: "USDC", Address: tok.Address, Decimals: &six}})
	require.NoError(t, err)
	_, _, err = resolveTokens(ctx, sim.Client(), []tokenConfig{{Symbol: "USDC", Address: tok.Address, Decimals: &eighteen}})
	require.ErrorContains(t, err, "configured with 18 decimals but the contract says 6")
	_, _, err = resolveTokens(ctx, sim.Client(), []tokenConfig{{Symbol: "NONE", Address: common.HexToAddress(usdcHex)}})
	require.ErrorContains(t, err, "is it an ERC-20 contract on this chain?")
}
