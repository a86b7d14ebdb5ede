// Package hdwallet owns deposit-address derivation: BIP-39 mnemonics, BIP-32
// extended keys on secp256k1, and the BIP-44 path m/44'/60'/0'/0/<index> that
// gives every invoice its own address.
//
// It has two roles, kept in two types so that only the process that signs
// ever holds a private key:
//
//   - [Deriver] is public-only. It is built from the extended public key
//     (xpub) of the account node m/44'/60'/0'/0 and turns an index into an
//     EIP-55 address with one non-hardened BIP-32 step. The invoice API holds
//     a Deriver.
//   - [Wallet] holds the master key derived from a mnemonic. It yields the
//     private key for an index (used only by sweep), signs transactions, and
//     hands out its public side with [Wallet.Deriver]. [Signer] is the
//     interface sweep consumes, so that a KMS or HSM can replace the
//     in-memory Wallet.
//
// Start with a mnemonic on the signing side:
//
//	m, err := hdwallet.ParseMnemonic(phrase)      // 12 or 24 English words
//	w, err := hdwallet.NewWallet(m, passphrase)   // passphrase may be ""
//	xpub := w.Deriver().XPub()                    // give this to the API side
//
// and with the xpub on the public side:
//
//	d, err := hdwallet.NewDeriver(xpub)
//	addr, err := d.Address(invoiceIndex)          // index in [0, 2^31)
//
// Secrets never reach output by accident: [Mnemonic], [Wallet] and private
// [ExtendedKey] values print as "[REDACTED]" under every fmt verb and in
// log/slog, and no error string contains a word of a mnemonic or an encoded
// private key.
//
// The sweep wallet, which pays gas and must never collide with a deposit
// address, lives on a different BIP-44 account: [SweepPath]
// (m/44'/60'/1'/0/0), available as [Wallet.SweepKey].
//
// A derived key is invalid with probability below 2^-127 (BIP-32: IL ≥ n or
// a zero key). Derivation then fails with [ErrInvalidChild] and the caller
// should move on to the next index, as BIP-32 prescribes.
package hdwallet
