// Package sealed keeps secrets that no HSM can use directly — the BIP-39
// mnemonic (no HSM derives BIP-32 children) and PAY_SECRET_KEY — encrypted
// at rest under envelope encryption: each secret is encrypted with
// AES-256-GCM under a fresh random data key, and the data key is wrapped by
// a key that never leaves an HSM (pkcs11key.Wrapper) or a KMS
// (awskms.Wrapper). Only a process that can reach that key opens the
// secret.
//
// A sealed file is one JSON object, versioned, naming what it holds and
// the key that wraps it:
//
//	{"evmpay_sealed":1,"name":"PAY_MNEMONIC","provider":"pkcs11","key_id":"evmpay/seal",
//	 "wrapped_key":"…","nonce":"…","ciphertext":"…"}
//
// The header (version, name, provider, key id) is bound as associated
// data to both the wrapped data key and the ciphertext: a file renamed to
// hold another secret, or pointed at another key, does not open.
//
//	file, err := sealed.Seal(ctx, wrapper, "PAY_MNEMONIC", phrase)   // once, by `payd secrets seal`
//	s, err := sealed.Open(ctx, wrapper, "PAY_MNEMONIC", file)         // at start, in the roles that need it
//	defer s.Destroy()
//	use(s.Bytes())
//
// The opened plaintext lives in memory outside the Go heap where the OS
// allows it (Linux: an anonymous mapping, mlock'ed so it never reaches
// swap and excluded from core dumps), and is zeroed by Destroy. Secret
// prints as "[REDACTED]".
package sealed
