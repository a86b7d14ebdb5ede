package hdwallet

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	bip39 "github.com/tyler-smith/go-bip39"
)

// bip39Vector is one English entry of testdata/bip39-vectors.json (trezor
// python-mnemonic vectors.json): entropy, mnemonic, seed and BIP-32 root key,
// all with passphrase "TREZOR".
type bip39Vector struct {
	Entropy, Mnemonic, Seed, Xprv string
}

func loadBIP39Vectors(t *testing.T) []bip39Vector {
	t.Helper()
	raw, err := os.ReadFile("testdata/bip39-vectors.json")
	require.NoError(t, err)
	var file struct {
		English [][4]string `json:"english"`
	}
	require.NoError(t, json.Unmarshal(raw, &file))
	require.Len(t, file.English, 24, "the trezor file has 24 English vectors")
	out := make([]bip39Vector, len(file.English))
	for i, v := range file.English {
		out[i] = bip39Vector{v[0], v[1], v[2], v[3]}
	}
	return out
}

const junkMnemonic = "test test test test test test test test test test test junk"

func TestEnglishWordList_IsTheBIP39List(t *testing.T) {
	t.Parallel()
	// SHA-256 of bips/bip-0039/english.txt.
	sum := sha256.Sum256([]byte(strings.Join(englishWords[:], "\n") + "\n"))
	require.Equal(t, "2f5eed53a4727b4bf8880d8f3f199efc90e58503646d9ff8eff3a2ed3b24dbda", hex.EncodeToString(sum[:]))
	require.Len(t, englishIndex, 2048, "words are unique")
}

func TestParseMnemonic_TrezorVectors(t *testing.T) {
	t.Parallel()
	for i, v := range loadBIP39Vectors(t) {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			entropy, err := hex.DecodeString(v.Entropy)
			require.NoError(t, err)
			words := strings.Fields(v.Mnemonic)

			// Encoding entropy gives the vector's mnemonic (12/24 only).
			m, err := ParseMnemonic(v.Mnemonic)
			if len(words) != 12 && len(words) != 24 {
				require.ErrorIs(t, err, ErrMnemonicLength, "policy: only 12 or 24 words")
				// The BIP-39 decoding itself still handles every length.
				m, err = decodeMnemonic(words)
			} else {
				fromEntropy, err := NewMnemonic(entropy)
				require.NoError(t, err)
				require.Equal(t, v.Mnemonic, fromEntropy.Phrase())
			}
			require.NoError(t, err)
			require.Equal(t, entropy, m.Entropy())
			require.Equal(t, v.Mnemonic, m.Phrase())

			seed := m.Seed("TREZOR")
			require.Equal(t, v.Seed, hex.EncodeToString(seed))

			master, err := NewMasterKey(seed)
			require.NoError(t, err)
			require.Equal(t, v.Xprv, master.Serialize())
		})
	}
}

func TestParseMnemonic_WrongWordCount_ErrMnemonicLength(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 11, 13, 15, 18, 21, 23, 25, 48} {
		_, err := ParseMnemonic(strings.Repeat("abandon ", n))
		require.ErrorIs(t, err, ErrMnemonicLength, "%d words", n)
		require.Contains(t, err.Error(), fmt.Sprintf("got %d", n))
	}
}

func TestParseMnemonic_UnknownWord_ErrMnemonicWordWithPositionNotWord(t *testing.T) {
	t.Parallel()
	phrase := "abandon abandon abandon abandon zzyzx abandon abandon abandon abandon abandon abandon about"
	_, err := ParseMnemonic(phrase)
	require.ErrorIs(t, err, ErrMnemonicWord)
	require.NotErrorIs(t, err, ErrMnemonicChecksum)
	require.Contains(t, err.Error(), "#5")
	require.NotContains(t, err.Error(), "zzyzx")
	require.NotContains(t, err.Error(), "abandon")
}

func TestParseMnemonic_BadChecksum_ErrMnemonicChecksum(t *testing.T) {
	t.Parallel()
	for _, phrase := range []string{
		strings.TrimSpace(strings.Repeat("abandon ", 12)),
		strings.TrimSpace(strings.Repeat("abandon ", 24)),
		strings.Replace(junkMnemonic, "junk", "test", 1),
		// Two words swapped in a valid phrase.
		"legal winner thank year wave sausage worth useful legal winner yellow thank",
	} {
		_, err := ParseMnemonic(phrase)
		require.ErrorIs(t, err, ErrMnemonicChecksum)
		require.Equal(t, ErrMnemonicChecksum.Error(), err.Error(), "the message names no word")
	}
}

func TestParseMnemonic_NormalisesSpacesCaseAndUnicode(t *testing.T) {
	t.Parallel()
	want, err := ParseMnemonic(junkMnemonic)
	require.NoError(t, err)
	for _, phrase := range []string{
		"  " + junkMnemonic + "\n",
		strings.ReplaceAll(junkMnemonic, " ", " \t "),
		strings.ReplaceAll(junkMnemonic, " ", "\u3000"), // ideographic space
		strings.ToUpper(junkMnemonic),
		"Test test test test test test test test test test test Junk",
		strings.ReplaceAll(junkMnemonic, "t", "\uff54"), // fullwidth t, NFKD → t
	} {
		m, err := ParseMnemonic(phrase)
		require.NoError(t, err, "%q", phrase)
		require.Equal(t, want.Phrase(), m.Phrase())
		require.Equal(t, want.Seed(""), m.Seed(""))
	}
}

func TestSeed_PassphraseIsNFKDNormalised(t *testing.T) {
	t.Parallel()
	m, err := ParseMnemonic(junkMnemonic)
	require.NoError(t, err)
	composed := "caf\u00e9"    // é as one code point (NFC)
	decomposed := "cafe\u0301" // e + combining acute (NFD)
	require.Equal(t, m.Seed(composed), m.Seed(decomposed))
	require.NotEqual(t, m.Seed(""), m.Seed(composed), "a passphrase changes the wallet")
	require.NotEqual(t, m.Seed("Cafe"), m.Seed("cafe"), "passphrases are case-sensitive")
}

func TestParseMnemonic_AgreesWithGoBIP39(t *testing.T) {
	t.Parallel()
	for range 200 {
		for _, words := range []int{12, 24} {
			m, err := GenerateMnemonic(words)
			require.NoError(t, err)
			entropy, err := bip39.EntropyFromMnemonic(m.Phrase())
			require.NoError(t, err)
			require.Equal(t, m.Entropy(), entropy)
			require.Equal(t, bip39.NewSeed(m.Phrase(), "pass"), m.Seed("pass"))
		}
	}
}

func TestGenerateMnemonic_RejectsOtherLengths(t *testing.T) {
	t.Parallel()
	_, err := GenerateMnemonic(18)
	require.ErrorIs(t, err, ErrMnemonicLength)
	_, err = NewMnemonic(make([]byte, 24))
	require.ErrorIs(t, err, ErrEntropyLength)
}

// errorTemplates are the only shapes a ParseMnemonic error may have once
// digits are replaced by N: none can carry a word of the input.
var errorTemplates = map[string]bool{
	"hdwallet: mnemonic must have N or N words: got N":     true,
	"hdwallet: mnemonic has an unrecognised word: word #N": true,
	"hdwallet: mnemonic checksum mismatch":                 true,
}

var digits = regexp.MustCompile(`[0-9]+`)

func requireErrorEchoesNothing(t *testing.T, err error) {
	t.Helper()
	msg := digits.ReplaceAllString(err.Error(), "N")
	require.True(t, errorTemplates[msg], "unexpected error shape %q", msg)
}

func TestParseMnemonic_ErrorsNeverContainThePhrase(t *testing.T) {
	t.Parallel()
	for _, phrase := range []string{
		"secret",
		junkMnemonic + " extra",
		strings.Replace(junkMnemonic, "junk", "junky", 1),
		strings.Replace(junkMnemonic, "junk", "zoo", 1),
		strings.Repeat("correct horse battery staple ", 3),
	} {
		_, err := ParseMnemonic(phrase)
		require.Error(t, err)
		requireErrorEchoesNothing(t, err)
	}
}

func TestMnemonic_RedactedInFmtAndSlog(t *testing.T) {
	t.Parallel()
	m, err := ParseMnemonic(junkMnemonic)
	require.NoError(t, err)
	for _, out := range []string{
		fmt.Sprint(m), fmt.Sprint(*m),
		fmt.Sprintf("%v %+v %#v %s %q %x %X %d", m, m, m, m, m, m, m, m),
		fmt.Sprintf("%v %+v %#v %s %q %x %X %d", *m, *m, *m, *m, *m, *m, *m, *m),
		fmt.Sprintf("%v", struct{ M *Mnemonic }{m}),
		fmt.Sprintf("%+v", []any{m}),
	} {
		require.NotContains(t, out, "test")
		require.NotContains(t, out, "junk")
		require.NotContains(t, out, hex.EncodeToString(m.Entropy()))
		require.Contains(t, out, "REDACTED")
	}
	var buf strings.Builder
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("loaded", "mnemonic", m)
	slog.New(slog.NewTextHandler(&buf, nil)).Info("loaded", slog.Any("mnemonic", *m))
	require.NotContains(t, buf.String(), "junk")
	require.Contains(t, buf.String(), "REDACTED")
}

func TestMnemonic_WipeErasesEntropy(t *testing.T) {
	t.Parallel()
	m, err := GenerateMnemonic(24)
	require.NoError(t, err)
	entropy := m.entropy
	m.Wipe()
	require.Equal(t, make([]byte, 32), entropy)
	require.Zero(t, m.Words())
}
