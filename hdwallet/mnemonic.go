package hdwallet

import (
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"fmt"
	"log/slog"
	"strings"

	"github.com/tyler-smith/go-bip39/wordlists"
	"golang.org/x/text/unicode/norm"
)

// englishWords is a private copy of the BIP-39 English word list, taken once
// at start-up so that nothing can change it later. Its SHA-256 (words joined
// by "\n" plus a final "\n", i.e. english.txt) is pinned by a test.
var (
	englishWords [2048]string
	englishIndex = make(map[string]uint16, 2048)
)

func init() {
	if len(wordlists.English) != len(englishWords) {
		panic("hdwallet: BIP-39 English word list does not have 2048 words")
	}
	copy(englishWords[:], wordlists.English)
	for i, w := range englishWords {
		englishIndex[w] = uint16(i)
	}
}

// Mnemonic is a validated BIP-39 mnemonic of 12 or 24 English words. It is a
// secret: it prints as "[REDACTED]" under every fmt verb and in log/slog.
// The zero value is not usable; get one from ParseMnemonic, NewMnemonic or
// GenerateMnemonic.
type Mnemonic struct {
	words   []string
	entropy []byte
}

// ParseMnemonic validates a BIP-39 mnemonic in the English word list.
//
// The phrase is normalised before validation: Unicode NFKD (as BIP-39
// requires), split on any run of Unicode white space (so leading, trailing
// and repeated spaces, tabs and newlines do not matter) and lower-cased. The
// seed is computed from this canonical form (words joined by single
// spaces), so "  Abandon  abandon ..." and "abandon abandon ..." are the
// same wallet.
//
// Errors, checked in this order, wrap ErrMnemonicLength (not 12 or 24
// words), ErrMnemonicWord (a word not in the list; the error names its
// position, never the word) and ErrMnemonicChecksum. No error contains any
// part of the phrase.
func ParseMnemonic(phrase string) (*Mnemonic, error) {
	words := strings.Fields(norm.NFKD.String(phrase))
	if n := len(words); n != 12 && n != 24 {
		clear(words)
		return nil, fmt.Errorf("%w: got %d", ErrMnemonicLength, n)
	}
	return decodeMnemonic(words)
}

// decodeMnemonic turns 12 to 24 (a multiple of 3) normalised words into a
// Mnemonic, checking the word list and the checksum. It is the BIP-39
// decoding for every length; ParseMnemonic restricts the lengths. It takes
// ownership of words.
func decodeMnemonic(words []string) (*Mnemonic, error) {
	n := len(words)
	if n < 12 || n > 24 || n%3 != 0 {
		clear(words)
		return nil, fmt.Errorf("%w: got %d", ErrMnemonicLength, n)
	}
	// n words carry n*11 bits: ENT = n*32/3 bits of entropy, CS = n/3 bits
	// of checksum.
	var bits [33]byte // 24*11 = 264 bits
	for i := range words {
		w := strings.ToLower(words[i])
		idx, ok := englishIndex[w]
		if !ok {
			clear(words)
			return nil, fmt.Errorf("%w: word #%d", ErrMnemonicWord, i+1)
		}
		words[i] = englishWords[idx] // canonical, shared string
		for b := 0; b < 11; b++ {
			if idx&(1<<(10-b)) != 0 {
				pos := i*11 + b
				bits[pos/8] |= 0x80 >> (pos % 8)
			}
		}
	}
	entLen := n * 4 / 3 // bytes: 16 for 12 words, 32 for 24
	csBits := n / 3
	entropy := make([]byte, entLen)
	copy(entropy, bits[:entLen])
	sum := sha256.Sum256(entropy)
	mask := byte(0xFF << (8 - csBits))
	got := bits[entLen] & mask
	want := sum[0] & mask
	clear(bits[:])
	if got != want {
		clear(entropy)
		clear(words)
		return nil, ErrMnemonicChecksum
	}
	return &Mnemonic{words: words, entropy: entropy}, nil
}

// NewMnemonic encodes 16 bytes (12 words) or 32 bytes (24 words) of entropy
// as a BIP-39 mnemonic. entropy is copied.
func NewMnemonic(entropy []byte) (*Mnemonic, error) {
	if len(entropy) != 16 && len(entropy) != 32 {
		return nil, ErrEntropyLength
	}
	n := len(entropy) * 3 / 4 // words
	var bits [33]byte
	copy(bits[:], entropy)
	sum := sha256.Sum256(entropy)
	bits[len(entropy)] = sum[0]
	words := make([]string, n)
	for i := range words {
		var idx uint16
		for b := 0; b < 11; b++ {
			pos := i*11 + b
			idx <<= 1
			if bits[pos/8]&(0x80>>(pos%8)) != 0 {
				idx |= 1
			}
		}
		words[i] = englishWords[idx]
	}
	clear(bits[:])
	return &Mnemonic{words: words, entropy: append([]byte(nil), entropy...)}, nil
}

// GenerateMnemonic returns a new random mnemonic of 12 or 24 words from
// crypto/rand.
func GenerateMnemonic(words int) (*Mnemonic, error) {
	if words != 12 && words != 24 {
		return nil, fmt.Errorf("%w: got %d", ErrMnemonicLength, words)
	}
	entropy := make([]byte, words*4/3)
	defer clear(entropy)
	if _, err := rand.Read(entropy); err != nil {
		return nil, fmt.Errorf("hdwallet: reading random entropy: %w", err)
	}
	return NewMnemonic(entropy)
}

// Phrase returns the canonical mnemonic: lower-case words separated by
// single spaces. It is the secret itself; never log it.
func (m *Mnemonic) Phrase() string { return strings.Join(m.words, " ") }

// Words returns the number of words, 12 or 24.
func (m *Mnemonic) Words() int { return len(m.words) }

// Entropy returns a copy of the entropy the mnemonic encodes (16 or 32
// bytes).
func (m *Mnemonic) Entropy() []byte { return append([]byte(nil), m.entropy...) }

// Seed returns the 64-byte BIP-39 seed: PBKDF2-HMAC-SHA512 with 2048
// iterations of the canonical phrase, salted with "mnemonic" + passphrase.
// The passphrase is NFKD-normalised, as BIP-39 requires, and is used exactly
// otherwise (case and spaces matter); "" means no passphrase.
func (m *Mnemonic) Seed(passphrase string) []byte {
	return mnemonicSeed(m.Phrase(), passphrase)
}

func mnemonicSeed(phrase, passphrase string) []byte {
	salt := []byte("mnemonic" + norm.NFKD.String(passphrase))
	defer clear(salt)
	seed, err := pbkdf2.Key(sha512.New, norm.NFKD.String(phrase), salt, 2048, 64)
	if err != nil {
		// Only possible in FIPS 140-3 mode with a password shorter than
		// 112 bits, which a valid mnemonic never is.
		panic("hdwallet: pbkdf2: " + err.Error())
	}
	return seed
}

// Wipe overwrites the entropy and forgets the words. The Mnemonic must not be
// used afterwards. (Go strings cannot be overwritten; the words are shared
// word-list strings, so they reveal nothing once the slice is gone.)
func (m *Mnemonic) Wipe() {
	clear(m.entropy)
	clear(m.words)
	m.entropy, m.words = nil, nil
}

// String returns "[REDACTED]".
func (Mnemonic) String() string { return redacted }

// GoString returns "hdwallet.Mnemonic{[REDACTED]}".
func (Mnemonic) GoString() string { return "hdwallet.Mnemonic{" + redacted + "}" }

// Format prints "[REDACTED]" for every verb.
func (Mnemonic) Format(f fmt.State, _ rune) { writeRedacted(f, "hdwallet.Mnemonic") }

// LogValue keeps the mnemonic out of log/slog output.
func (Mnemonic) LogValue() slog.Value { return slog.StringValue(redacted) }
