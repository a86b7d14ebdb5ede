// Package pkcs11key keeps evmpay's account keys — the sweep wallet and the
// gas funder — in a hardware security module reached over PKCS#11, and
// wraps the data keys of sealed secrets (package sealed) with an AES key
// that never leaves the token.
//
// Keys are secp256k1 EC key pairs (CKM_EC_KEY_PAIR_GEN with the secp256k1
// OID 1.3.132.0.10) generated inside the token as sensitive and
// non-extractable, or imported once from an existing private key (then
// equally non-extractable). Each key is found by its CKA_LABEL. A
// transaction is signed in the token with CKM_ECDSA over the transaction's
// 32-byte signing hash; s is normalised to the low half of the curve order
// and the recovery id is found by recovering the public key
// (hdwallet.RecoverableSignature).
//
// Start by opening the token, then take a signer by label:
//
//	tok, err := pkcs11key.Open(pkcs11key.Config{
//		Module: "/usr/lib/softhsm/libsofthsm2.so", // the vendor's PKCS#11 library
//		Token:  "evmpay",                          // CKA_LABEL of the token
//		PIN:    pin,                               // the user PIN
//	})
//	funder, err := tok.Signer(ctx, "gas-funder")       // or tok.GenerateKey(ctx, "gas-funder")
//	signed, err := funder.SignTx(ctx, tx, types.LatestSignerForChainID(chainID))
//
// *Signer has the method set of sweep.AccountSigner (Address, SignTx), so
// it plugs into sweep.Keys as the sweep wallet or the gas funder.
//
// # Failures
//
// Every error names the token and the key by label, never the PIN:
// ErrWrongPIN for a refused login, ErrNotSigningKey for a key whose
// CKA_SIGN is false, ErrKeyNotFound for a missing label, ErrUnavailable
// when the module or the token cannot be reached. A session that breaks
// (token removed, device error, a session closed under us) is reopened
// and the operation tried once more; if the token stays unreachable the
// caller gets ErrUnavailable and nothing was signed.
//
// PKCS#11 is a C interface: this package needs cgo, and the vendor's
// module (a shared library) at run time.
package pkcs11key
