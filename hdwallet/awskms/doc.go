// Package awskms keeps evmpay's account keys — the sweep wallet and the gas
// funder — in AWS KMS, and wraps the data keys of sealed secrets (package
// sealed) with a KMS symmetric key.
//
// A signing key is an asymmetric KMS key of spec ECC_SECG_P256K1 and usage
// SIGN_VERIFY. A transaction is signed by KMS Sign with ECDSA_SHA_256 and
// MessageType DIGEST over the transaction's 32-byte signing hash (KMS does
// not hash it again); the DER signature is split into r and s, s is
// normalised to the low half of the curve order, and the recovery id is
// found by recovering the public key that GetPublicKey returned
// (hdwallet.RecoverableSignature). The key's address is read once, when
// the signer is made.
//
//	cfg, _ := config.LoadDefaultConfig(ctx)               // credentials, region
//	client := kms.NewFromConfig(cfg)
//	funder, err := awskms.NewSigner(ctx, client, "alias/evmpay-gas-funder")
//	signed, err := funder.SignTx(ctx, tx, types.LatestSignerForChainID(chainID))
//
// *Signer has the method set of sweep.AccountSigner (Address, SignTx). The
// package consumes only the few KMS operations it calls (SignAPI, WrapAPI,
// CreateAPI); *kms.Client satisfies them.
//
// # Failures
//
// Errors name the key id, never a credential: ErrKeyNotFound, ErrNotSigningKey
// (wrong key spec or usage, the key disabled, or kms:Sign denied),
// ErrUnavailable (KMS not reached: network, throttling, a 5xx). Nothing
// is signed when an error is returned.
package awskms
