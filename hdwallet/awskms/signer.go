package awskms

import (
	"context"
	"crypto/ecdsa"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/aws/smithy-go"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/evmpay/evmpay/hdwallet"
)

// Errors. Test for them with errors.Is; the messages name the key id.
var (
	// ErrUnavailable: KMS could not be reached or did not answer (network,
	// throttling, an internal error): try again later.
	ErrUnavailable = errors.New("awskms: KMS unavailable")
	// ErrKeyNotFound: no such key (or alias).
	ErrKeyNotFound = errors.New("awskms: key not found")
	// ErrNotSigningKey: the key is not an ECC_SECG_P256K1 SIGN_VERIFY key,
	// is disabled or pending deletion, or the credentials may not sign
	// with it.
	ErrNotSigningKey = errors.New("awskms: key may not sign")
	// ErrNotWrappingKey: the key is not a symmetric ENCRYPT_DECRYPT key,
	// is disabled, or the credentials may not use it.
	ErrNotWrappingKey = errors.New("awskms: key may not wrap data keys")
)

// SignAPI is what a Signer needs from KMS; *kms.Client satisfies it.
type SignAPI interface {
	GetPublicKey(ctx context.Context, in *kms.GetPublicKeyInput, opts ...func(*kms.Options)) (*kms.GetPublicKeyOutput, error)
	Sign(ctx context.Context, in *kms.SignInput, opts ...func(*kms.Options)) (*kms.SignOutput, error)
}

// oidSecp256k1 is the named curve of ECC_SECG_P256K1 keys.
var (
	oidSecp256k1   = asn1.ObjectIdentifier{1, 3, 132, 0, 10}
	oidECPublicKey = asn1.ObjectIdentifier{1, 2, 840, 10045, 2, 1}
)

// Signer signs with one ECC_SECG_P256K1 key in KMS. It has the method set
// of sweep.AccountSigner. It prints as its key id and address only.
type Signer struct {
	api   SignAPI
	keyID string
	pub   *ecdsa.PublicKey
	addr  common.Address
}

// NewSigner reads the public key of keyID (a key id, ARN or alias) and
// checks, before anything is signed, that it is an ECC_SECG_P256K1 key for
// SIGN_VERIFY with ECDSA_SHA_256.
func NewSigner(ctx context.Context, api SignAPI, keyID string) (*Signer, error) {
	if keyID == "" {
		return nil, errors.New("awskms: a key id is required")
	}
	out, err := api.GetPublicKey(ctx, &kms.GetPublicKeyInput{KeyId: aws.String(keyID)})
	if err != nil {
		return nil, keyError(keyID, "read the public key of", err, ErrNotSigningKey)
	}
	if out.KeySpec != kmstypes.KeySpecEccSecgP256k1 || out.KeyUsage != kmstypes.KeyUsageTypeSignVerify {
		return nil, fmt.Errorf("%w: key %s is %s for %s; a signing key must be ECC_SECG_P256K1 for SIGN_VERIFY",
			ErrNotSigningKey, keyID, out.KeySpec, out.KeyUsage)
	}
	if !slices.Contains(out.SigningAlgorithms, kmstypes.SigningAlgorithmSpecEcdsaSha256) {
		return nil, fmt.Errorf("%w: key %s does not offer ECDSA_SHA_256", ErrNotSigningKey, keyID)
	}
	pub, err := parsePublicKey(out.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("awskms: key %s: %w", keyID, err)
	}
	return &Signer{api: api, keyID: keyID, pub: pub, addr: crypto.PubkeyToAddress(*pub)}, nil
}

// parsePublicKey reads a DER SubjectPublicKeyInfo of a secp256k1 key
// (crypto/x509 knows no secp256k1).
func parsePublicKey(der []byte) (*ecdsa.PublicKey, error) {
	var spki struct {
		Algorithm pkix.AlgorithmIdentifier
		PublicKey asn1.BitString
	}
	if rest, err := asn1.Unmarshal(der, &spki); err != nil || len(rest) != 0 {
		return nil, errors.New("the public key is not a DER SubjectPublicKeyInfo")
	}
	var curve asn1.ObjectIdentifier
	if !spki.Algorithm.Algorithm.Equal(oidECPublicKey) {
		return nil, errors.New("the public key is not an EC key")
	}
	if _, err := asn1.Unmarshal(spki.Algorithm.Parameters.FullBytes, &curve); err != nil || !curve.Equal(oidSecp256k1) {
		return nil, errors.New("the public key is not on secp256k1")
	}
	pub, err := crypto.UnmarshalPubkey(spki.PublicKey.RightAlign())
	if err != nil {
		return nil, fmt.Errorf("the public key's point: %w", err)
	}
	return pub, nil
}

// KeyID is the key id, ARN or alias the signer was made with.
func (k *Signer) KeyID() string { return k.keyID }

// Address is the key's Ethereum address.
func (k *Signer) Address() common.Address { return k.addr }

// PublicKey is the key's public half.
func (k *Signer) PublicKey() *ecdsa.PublicKey { return k.pub }

// SignTx signs tx in KMS for chain signer.
func (k *Signer) SignTx(ctx context.Context, tx *types.Transaction, signer types.Signer) (*types.Transaction, error) {
	return hdwallet.SignTxWith(ctx, tx, signer, k.addr, k.SignHash)
}

// SignHash signs a 32-byte digest in KMS and returns [R || S || V] with a
// low s and V 0 or 1.
func (k *Signer) SignHash(ctx context.Context, hash common.Hash) ([]byte, error) {
	out, err := k.api.Sign(ctx, &kms.SignInput{
		KeyId:            aws.String(k.keyID),
		Message:          hash[:],
		MessageType:      kmstypes.MessageTypeDigest,
		SigningAlgorithm: kmstypes.SigningAlgorithmSpecEcdsaSha256,
	})
	if err != nil {
		return nil, keyError(k.keyID, "sign with", err, ErrNotSigningKey)
	}
	var rs struct{ R, S *big.Int }
	if rest, err := asn1.Unmarshal(out.Signature, &rs); err != nil || len(rest) != 0 {
		return nil, fmt.Errorf("awskms: key %s: the signature is not DER (r, s)", k.keyID)
	}
	sig, err := hdwallet.RecoverableSignature(hash[:], rs.R, rs.S, k.pub)
	if err != nil {
		return nil, fmt.Errorf("awskms: key %s: %w", k.keyID, err)
	}
	return sig, nil
}

// Check reports whether the key can be reached (GetPublicKey).
func (k *Signer) Check(ctx context.Context) error {
	if _, err := k.api.GetPublicKey(ctx, &kms.GetPublicKeyInput{KeyId: aws.String(k.keyID)}); err != nil {
		return keyError(k.keyID, "reach", err, ErrNotSigningKey)
	}
	return nil
}

// String names the key: "awskms:<key id>(0xAddress)".
func (k *Signer) String() string { return "awskms:" + k.keyID + "(" + k.addr.Hex() + ")" }

// GoString is String.
func (k *Signer) GoString() string { return k.String() }

// LogValue logs the key's name and address.
func (k *Signer) LogValue() slog.Value { return slog.StringValue(k.String()) }

// keyError classifies a KMS error: what KMS said about the key (not found,
// refused: refusal) or that KMS was not reached (ErrUnavailable). The
// message names the key and the operation, and KMS's own words.
func keyError(keyID, what string, err error, refusal error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %s key %s: %w", ErrUnavailable, what, keyID, err)
	}
	var api smithy.APIError
	if !errors.As(err, &api) {
		return fmt.Errorf("%w: %s key %s: %w", ErrUnavailable, what, keyID, err)
	}
	var (
		notFound *kmstypes.NotFoundException
		usage    *kmstypes.InvalidKeyUsageException
		unsup    *kmstypes.UnsupportedOperationException
		disabled *kmstypes.DisabledException
		state    *kmstypes.KMSInvalidStateException
		internal *kmstypes.KMSInternalException
		depend   *kmstypes.DependencyTimeoutException
	)
	switch {
	case errors.As(err, &notFound):
		return fmt.Errorf("%w: %s key %s: %s", ErrKeyNotFound, what, keyID, api.ErrorMessage())
	case errors.As(err, &usage), errors.As(err, &unsup), errors.As(err, &disabled), errors.As(err, &state), api.ErrorCode() == "AccessDeniedException":
		return fmt.Errorf("%w: %s key %s: %s: %s", refusal, what, keyID, api.ErrorCode(), api.ErrorMessage())
	case errors.As(err, &internal), errors.As(err, &depend), api.ErrorFault() == smithy.FaultServer,
		api.ErrorCode() == "ThrottlingException", api.ErrorCode() == "LimitExceededException":
		return fmt.Errorf("%w: %s key %s: %s: %s", ErrUnavailable, what, keyID, api.ErrorCode(), api.ErrorMessage())
	}
	return fmt.Errorf("awskms: %s key %s: %s: %s", what, keyID, api.ErrorCode(), api.ErrorMessage())
}
