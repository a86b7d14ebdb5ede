package hdwallet

import "errors"

// Errors returned by this package. Test for them with errors.Is. No error
// string ever contains a word of a mnemonic, a passphrase, or an encoded
// private key.
var (
	// ErrMnemonicLength: the mnemonic does not have 12 or 24 words.
	ErrMnemonicLength = errors.New("hdwallet: mnemonic must have 12 or 24 words")
	// ErrMnemonicWord: a word of the mnemonic is not in the BIP-39 English
	// list. The error says which position, never which word.
	ErrMnemonicWord = errors.New("hdwallet: mnemonic has an unrecognised word")
	// ErrMnemonicChecksum: every word is valid but the BIP-39 checksum does
	// not match, usually a mistyped or reordered word.
	ErrMnemonicChecksum = errors.New("hdwallet: mnemonic checksum mismatch")
	// ErrEntropyLength: entropy for a new mnemonic must be 16 or 32 bytes.
	ErrEntropyLength = errors.New("hdwallet: entropy must be 16 or 32 bytes")

	// ErrSeedLength: a BIP-32 seed must be 16 to 64 bytes.
	ErrSeedLength = errors.New("hdwallet: seed must be 16 to 64 bytes")
	// ErrIndexOutOfRange: a deposit index must be in [0, 2^31).
	ErrIndexOutOfRange = errors.New("hdwallet: index out of range [0, 2^31)")
	// ErrInvalidChild: BIP-32 derivation produced an invalid key for this
	// index (probability below 2^-127); use the next index.
	ErrInvalidChild = errors.New("hdwallet: derived key is invalid for this index; use the next index")
	// ErrHardenedFromPublic: a hardened child cannot be derived from a
	// public key.
	ErrHardenedFromPublic = errors.New("hdwallet: cannot derive a hardened child from a public key")
	// ErrDepth: BIP-32 keys have a depth of at most 255.
	ErrDepth = errors.New("hdwallet: maximum derivation depth (255) exceeded")
	// ErrInvalidPath: a derivation path is malformed.
	ErrInvalidPath = errors.New("hdwallet: invalid derivation path")
	// ErrInvalidExtendedKey: a serialized extended key (xprv/xpub) is
	// malformed, has a bad checksum, an unknown version, or an invalid key.
	ErrInvalidExtendedKey = errors.New("hdwallet: invalid extended key")
	// ErrNotAccountKey: a Deriver needs the extended public key of the
	// account node m/44'/60'/0'/0 (depth 4, child number 0).
	ErrNotAccountKey = errors.New("hdwallet: not the extended key of m/44'/60'/0'/0")
	// ErrWiped: the Wallet's key material has been erased with Wipe.
	ErrWiped = errors.New("hdwallet: wallet has been wiped")
)
