package main

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"

	"github.com/evmpay/evmpay/invoice"
)

// runPay pays an EIP-681 payment URI from a funded account: the dev wallet a
// newcomer needs. It prints the transaction hash, waits for the receipt and
// fails when the transaction fails.
func runPay(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("pay")
	rpcAddr := fs.String("rpc", "127.0.0.1:8545", "chain JSON-RPC address (host:port or URL)")
	keyFile := fs.String("key-file", "", "file holding the payer's hex private key (default: dev account 0 of the well-known test mnemonic)")
	timeout := fs.Duration("timeout", 60*time.Second, "how long to wait for the transaction to be mined")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("usage: payd pay [--rpc host:port] [--key-file file] <ethereum:… payment URI, native or /transfer>")
	}
	p, err := parsePayURI(fs.Arg(0))
	if err != nil {
		return err
	}
	key, err := payerKey(*keyFile)
	if err != nil {
		return err
	}
	client, err := ethclient.DialContext(ctx, rpcURL(*rpcAddr))
	if err != nil {
		return fmt.Errorf("payd pay: connect to %s: %w", *rpcAddr, err)
	}
	defer client.Close()

	chainID, err := client.ChainID(ctx)
	if err != nil {
		return fmt.Errorf("payd pay: no chain at %s (start one with `payd dev` or `payd devchain`): %w", *rpcAddr, err)
	}
	if !chainID.IsUint64() || chainID.Uint64() != p.chainID {
		return fmt.Errorf("payd pay: the URI asks for chain %d but %s is chain %s", p.chainID, *rpcAddr, chainID)
	}
	from := crypto.PubkeyToAddress(key.PublicKey)
	nonce, err := client.PendingNonceAt(ctx, from)
	if err != nil {
		return fmt.Errorf("payd pay: nonce: %w", err)
	}
	tip, err := client.SuggestGasTipCap(ctx)
	if err != nil {
		return fmt.Errorf("payd pay: gas tip: %w", err)
	}
	head, err := client.HeaderByNumber(ctx, nil)
	if err != nil {
		return fmt.Errorf("payd pay: latest block: %w", err)
	}
	feeCap := new(big.Int).Set(tip)
	if head.BaseFee != nil {
		feeCap.Add(feeCap, new(big.Int).Mul(head.BaseFee, big.NewInt(2)))
	}
	gas := uint64(21_000)
	if p.data != nil {
		// A token transfer: its gas is estimated (and the estimate fails when
		// the payer lacks the tokens).
		est, err := client.EstimateGas(ctx, ethereum.CallMsg{From: from, To: &p.to, Data: p.data})
		if err != nil {
			return fmt.Errorf("payd pay: the token transfer would fail (does the payer hold the tokens?): %w", err)
		}
		gas = est + est/5
	}
	tx := types.NewTx(&types.DynamicFeeTx{
		ChainID:   chainID,
		Nonce:     nonce,
		GasTipCap: tip,
		GasFeeCap: feeCap,
		Gas:       gas,
		To:        &p.to,
		Value:     p.value,
		Data:      p.data,
	})
	signed, err := types.SignTx(tx, types.LatestSignerForChainID(chainID), key)
	if err != nil {
		return fmt.Errorf("payd pay: sign: %w", err)
	}
	if err := client.SendTransaction(ctx, signed); err != nil {
		return fmt.Errorf("payd pay: send: %w", err)
	}
	fmt.Fprintln(stdout, signed.Hash().Hex())

	wait, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	for {
		receipt, err := client.TransactionReceipt(wait, signed.Hash())
		if err == nil {
			if receipt.Status != types.ReceiptStatusSuccessful {
				return fmt.Errorf("payd pay: transaction %s failed in block %s", signed.Hash().Hex(), receipt.BlockNumber)
			}
			return nil
		}
		select {
		case <-wait.Done():
			return fmt.Errorf("payd pay: transaction %s not mined within %s", signed.Hash().Hex(), *timeout)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// payment is the transaction a payment URI asks for.
type payment struct {
	chainID uint64
	to      common.Address
	value   *big.Int
	data    []byte
}

// parsePayURI reads a native-coin URI (ethereum:<address>@<chain>?value=…)
// or an ERC-20 transfer URI
// (ethereum:<token>@<chain>/transfer?address=…&uint256=…).
func parsePayURI(s string) (payment, error) {
	if strings.Contains(s, "/transfer") {
		t, err := invoice.ParseTransferURI(s)
		if err != nil {
			return payment{}, fmt.Errorf("payd pay: %w", err)
		}
		if t.Amount == nil || t.Amount.IsZero() {
			return payment{}, errors.New("payd pay: the transfer URI has no amount to pay")
		}
		return payment{chainID: t.ChainID, to: t.Token, value: new(big.Int), data: erc20Transfer(t.To, t.Amount.ToBig())}, nil
	}
	uri, err := invoice.ParsePaymentURI(s)
	if err != nil {
		return payment{}, fmt.Errorf("payd pay: %w", err)
	}
	if uri.Value == nil || uri.Value.IsZero() {
		return payment{}, errors.New("payd pay: the payment URI has no value to pay")
	}
	return payment{chainID: uri.ChainID, to: uri.Address, value: uri.Value.ToBig()}, nil
}

// erc20Transfer is the call data of transfer(to, amount).
func erc20Transfer(to common.Address, amount *big.Int) []byte {
	data := crypto.Keccak256([]byte("transfer(address,uint256)"))[:4]
	data = append(data, common.LeftPadBytes(to[:], 32)...)
	return append(data, common.LeftPadBytes(amount.Bytes(), 32)...)
}

// payerKey reads a hex private key from file, or returns dev account 0.
func payerKey(file string) (*ecdsa.PrivateKey, error) {
	if file == "" {
		w, err := devWallet()
		if err != nil {
			return nil, err
		}
		return w.PrivateKey(0)
	}
	b, err := readSecretFile("payd pay: --key-file", file)
	if err != nil {
		return nil, err
	}
	k, err := crypto.HexToECDSA(strings.TrimPrefix(strings.TrimSpace(string(b)), "0x"))
	if err != nil {
		return nil, fmt.Errorf("payd pay: --key-file %s does not hold a hex private key", file)
	}
	return k, nil
}

// rpcURL accepts host:port or a full URL.
func rpcURL(addr string) string {
	if strings.Contains(addr, "://") {
		return addr
	}
	return "http://" + addr
}
