package sweep

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"strings"

	"github.com/ethereum/go-ethereum/rpc"
)

// Values of an invoice's sweep_error. A FAILED sweep carries exactly one;
// the first three are the ones DESIGN.md names. None holds a secret.
const (
	// ReasonInsufficientGas: the sweep wallet (or, under PolicyDeduct, the
	// deposit) cannot pay the gas. Top the wallet up and retry.
	ReasonInsufficientGas = "insufficient gas"
	// ReasonNonceTooLow: the nonce of a transaction was used by another
	// transaction, still after one block and a bounded number of retries.
	ReasonNonceTooLow = "nonce too low"
	// ReasonReplacementUnderpriced: the node kept refusing a replacement as
	// underpriced after a bounded number of fee bumps.
	ReasonReplacementUnderpriced = "replacement tx underpriced"
	// ReasonUnderpriced: the node kept refusing the fee (below the base fee
	// or its minimum) after a bounded number of fee bumps.
	ReasonUnderpriced = "transaction underpriced"
	// ReasonNotMined: the transaction was accepted but not mined after a
	// bounded number of replacements.
	ReasonNotMined = "transaction not mined"
	// ReasonReplacementCap: a gas top-up was replaced MaxAttempts times,
	// the replacement cap, and is still not mined: the sweeper stops
	// re-pricing it and raises an operator alert (WalletStatus.Alerts, the
	// replacement_stopped metric, an error log). Its stored bytes stay
	// valid; look for what blocks it (a nonce gap, a node that drops it).
	// (A sweep at its cap FAILS with ReasonNotMined and the same alert.)
	ReasonReplacementCap = "replacement cap reached"
	// ReasonFeeCeiling: a stuck transaction is already priced at
	// MaxFeePerGas, the fee ceiling, and is not re-priced above it (an
	// operator alert); the sweep FAILS with it once its retries are used.
	ReasonFeeCeiling = "fee ceiling reached"
	// ReasonReverted: a sweep or funding transaction was mined and failed.
	ReasonReverted = "transaction reverted"
	// ReasonNothingToSweep: the deposit address holds nothing of the payer's.
	ReasonNothingToSweep = "nothing to sweep"
	// ReasonBalanceBelowGas: under PolicyDeduct the deposit balance does not
	// cover the gas of the sweep.
	ReasonBalanceBelowGas = "deposit balance below gas cost"
	// ReasonDepositSpent: the deposit address sent a transaction the sweeper
	// did not sign: it is never swept (twice).
	ReasonDepositSpent = "deposit address already spent from"
	// ReasonKeyMismatch: the deposit signer's address for the invoice's
	// derivation index is not the invoice's deposit address.
	ReasonKeyMismatch = "deposit key mismatch"
	// ReasonNoSettlementAddress: the merchant has no settlement address.
	ReasonNoSettlementAddress = "merchant has no settlement address"
	// ReasonSettlementIsContract: the settlement address has code; only
	// plain transfers (21000 gas) are supported.
	ReasonSettlementIsContract = "settlement address is a contract"
	// ReasonSettlementIsService: the settlement address is one the service
	// derives or holds — a deposit address, the sweep wallet or the gas
	// funder. Funds sent there are credited to nothing, so nothing is sent.
	ReasonSettlementIsService = "settlement address belongs to this service"
	// ReasonChainMismatch: the invoice is for another chain than the node's.
	ReasonChainMismatch = "invoice chain id mismatch"
	// ReasonNoWallet: PolicySponsor without a sweep wallet signer.
	ReasonNoWallet = "no sweep wallet configured"
	// reasonRejected prefixes other refusals by the node.
	reasonRejected = "rejected by node: "
)

// class is the meaning of a node's answer to eth_sendRawTransaction.
type class int

const (
	classOK                     class = iota // accepted
	classAlreadyKnown                        // the node has it already: success
	classNonceTooLow                         // the nonce was used
	classNonceTooHigh                        // a gap before it: wait for the earlier nonces
	classReplacementUnderpriced              // same nonce in the pool at a price we did not beat by enough
	classUnderpriced                         // fee cap or tip below what the node or block accepts
	classInsufficientFunds                   // the sender cannot pay value + gas × fee cap
	classRejected                            // any other refusal: final
	classTransient                           // no answer (transport, timeout, pool full): try again later
)

func (c class) String() string {
	switch c {
	case classOK:
		return "ok"
	case classAlreadyKnown:
		return "already known"
	case classNonceTooLow:
		return ReasonNonceTooLow
	case classNonceTooHigh:
		return "nonce too high"
	case classReplacementUnderpriced:
		return ReasonReplacementUnderpriced
	case classUnderpriced:
		return ReasonUnderpriced
	case classInsufficientFunds:
		return ReasonInsufficientGas
	case classRejected:
		return "rejected"
	default:
		return "transient"
	}
}

// accepted reports whether the node has the transaction.
func (c class) accepted() bool { return c == classOK || c == classAlreadyKnown }

// cosmosNonce matches Cosmos SDK / Ethermint nonce refusals:
// "invalid nonce; got 3, expected 4: invalid sequence".
var cosmosNonce = regexp.MustCompile(`got (\d+), expected (\d+)`)

// classify maps a node's answer to its meaning. Nodes answer with JSON-RPC
// error messages (go-ethereum's, or a Cosmos EVM node's), so the message is
// what carries the meaning.
func classify(err error) class {
	if err == nil {
		return classOK
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return classTransient
	}
	msg := strings.ToLower(err.Error())
	has := func(subs ...string) bool {
		for _, s := range subs {
			if strings.Contains(msg, s) {
				return true
			}
		}
		return false
	}
	switch {
	case has("already known", "known transaction", "already in mempool", "tx already exists in cache"):
		return classAlreadyKnown
	case has("replacement transaction underpriced", "replacement tx underpriced"):
		return classReplacementUnderpriced
	case has("nonce too low"):
		return classNonceTooLow
	case has("nonce too high"):
		return classNonceTooHigh
	case has("invalid nonce", "invalid sequence", "account sequence mismatch"):
		if m := cosmosNonce.FindStringSubmatch(msg); m != nil {
			got, _ := strconv.ParseUint(m[1], 10, 64)
			want, _ := strconv.ParseUint(m[2], 10, 64)
			if got > want {
				return classNonceTooHigh
			}
		}
		return classNonceTooLow
	case has("insufficient funds"):
		return classInsufficientFunds
	case has("max fee per gas less than block base fee", "transaction underpriced", "gas price below minimum",
		"insufficient fee", "fee too low", "gas tip cap", "min gas price", "minimum global fee",
		"gas price too low", "underpriced"):
		return classUnderpriced
	case has("txpool is full", "mempool is full", "out of capacity", "address already reserved"):
		return classTransient
	}
	var rpcErr rpc.Error
	if errors.As(err, &rpcErr) {
		return classRejected
	}
	return classTransient
}

// rejectedReason is a short, secret-free sweep_error for a final refusal:
// the name of a known go-ethereum refusal, or a generic one. Node messages
// are not copied whole (they may carry addresses and balances).
func rejectedReason(err error) string {
	msg := strings.ToLower(err.Error())
	for _, known := range []string{
		"intrinsic gas too low", "exceeds block gas limit", "invalid sender", "transaction type not supported",
		"oversized data", "negative value", "max priority fee per gas higher than max fee per gas",
		"nonce has max value", "gas limit too high", "sender not an eoa", "invalid chain id",
	} {
		if strings.Contains(msg, known) {
			return reasonRejected + known
		}
	}
	return reasonRejected + "transaction refused"
}
