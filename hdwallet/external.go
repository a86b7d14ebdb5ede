package hdwallet

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
)

// Signatures made outside the process (an HSM, a KMS) come back as a bare
// ECDSA (r, s): Ethereum needs s in the lower half of the curve order
// (EIP-2) and the recovery id v, which no HSM returns. The helpers below
// turn such a signature into the 65-byte [R || S || V] form go-ethereum
// takes, for the signer packages under hdwallet (pkcs11key, awskms).

var (
	secp256k1N     = crypto.S256().Params().N
	secp256k1HalfN = new(big.Int).Rsh(secp256k1N, 1)
)

// ErrBadSignature: an external signer returned a signature that is not a
// valid secp256k1 signature of the digest by the expected key.
var ErrBadSignature = errors.New("hdwallet: the external signer's signature does not verify against its public key")

// RecoverableSignature returns [R || S || V] for an ECDSA signature (r, s)
// of the 32-byte digest hash by pub: s is normalised to the lower half of
// the curve order (s and n − s are both valid; Ethereum accepts only the
// low one) and V (0 or 1) is found by recovering the public key with each
// candidate. It fails with ErrBadSignature when neither recovers pub.
func RecoverableSignature(hash []byte, r, s *big.Int, pub *ecdsa.PublicKey) ([]byte, error) {
	if len(hash) != 32 {
		return nil, fmt.Errorf("hdwallet: digest must be 32 bytes, got %d", len(hash))
	}
	if r.Sign() <= 0 || s.Sign() <= 0 || r.Cmp(secp256k1N) >= 0 || s.Cmp(secp256k1N) >= 0 {
		return nil, ErrBadSignature
	}
	if s.Cmp(secp256k1HalfN) > 0 {
		s = new(big.Int).Sub(secp256k1N, s)
	}
	want := crypto.FromECDSAPub(pub)
	sig := make([]byte, 65)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:64])
	for v := byte(0); v < 2; v++ {
		sig[64] = v
		got, err := crypto.Ecrecover(hash, sig)
		if err == nil && bytes.Equal(got, want) {
			return sig, nil
		}
	}
	return nil, ErrBadSignature
}

// HashSigner signs 32-byte digests with one secp256k1 key held elsewhere
// and returns [R || S || V], V being 0 or 1.
type HashSigner func(ctx context.Context, hash common.Hash) ([]byte, error)

// SignTxWith signs tx for chain signer with a key held elsewhere: it hashes
// the transaction as signer does, has sign sign the digest, and checks that
// the result recovers from (a signer that signed with another key is an
// error, never a transaction from the wrong account).
func SignTxWith(ctx context.Context, tx *types.Transaction, signer types.Signer, from common.Address, sign HashSigner) (*types.Transaction, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sig, err := sign(ctx, signer.Hash(tx))
	if err != nil {
		return nil, err
	}
	signed, err := tx.WithSignature(signer, sig)
	if err != nil {
		return nil, fmt.Errorf("hdwallet: applying an external signature: %w", err)
	}
	if got, err := types.Sender(signer, signed); err != nil || got != from {
		return nil, ErrBadSignature
	}
	return signed, nil
}
