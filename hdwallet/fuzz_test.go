package hdwallet

import (
	"errors"
	"strings"
	"testing"

	bip39 "github.com/tyler-smith/go-bip39"
)

// FuzzParseMnemonic checks that ParseMnemonic never panics, that every error
// is one of the three sentinels in a fixed shape (so it cannot echo the
// input), and that every accepted phrase is canonical and agrees with
// NewMnemonic and go-bip39. The seed corpus runs as a normal unit test; CI
// fuzzes it with: go test -run '^$' -fuzz '^FuzzParseMnemonic$' -fuzztime=5s ./hdwallet
func FuzzParseMnemonic(f *testing.F) {
	f.Add(junkMnemonic)
	f.Add("abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about")
	f.Add("legal winner thank year wave sausage worth useful legal winner thank yellow")
	f.Add("zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo vote")
	f.Add("  TEST test\ttest test\ntest test test test test test test JUNK  ")
	f.Add(strings.ReplaceAll(junkMnemonic, " ", "\u3000"))
	f.Add("")
	f.Add("abandon")
	f.Add(strings.Repeat("abandon ", 12))
	f.Add(strings.Repeat("abandon ", 13))
	f.Add("test test test test test test test test test test test jünk")
	f.Add("\xff\xfe test")
	f.Fuzz(func(t *testing.T, phrase string) {
		m, err := ParseMnemonic(phrase)
		if err != nil {
			if !errors.Is(err, ErrMnemonicLength) && !errors.Is(err, ErrMnemonicWord) && !errors.Is(err, ErrMnemonicChecksum) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			if msg := digits.ReplaceAllString(err.Error(), "N"); !errorTemplates[msg] {
				t.Fatalf("error shape %q may echo input", msg)
			}
			return
		}
		if n := m.Words(); n != 12 && n != 24 {
			t.Fatalf("accepted %d words", n)
		}
		again, err := ParseMnemonic(m.Phrase())
		if err != nil || again.Phrase() != m.Phrase() {
			t.Fatalf("canonical phrase does not re-parse to itself: %v", err)
		}
		fromEntropy, err := NewMnemonic(m.Entropy())
		if err != nil || fromEntropy.Phrase() != m.Phrase() {
			t.Fatalf("entropy does not encode back to the phrase: %v", err)
		}
		ent, err := bip39.EntropyFromMnemonic(m.Phrase())
		if err != nil || string(ent) != string(m.Entropy()) {
			t.Fatalf("go-bip39 disagrees: %v", err)
		}
	})
}

// FuzzParseExtendedKey checks that ParseExtendedKey never panics, that its
// errors never contain the input, and that an accepted key serializes back to
// exactly the input.
func FuzzParseExtendedKey(f *testing.F) {
	f.Add("xprv9s21ZrQH143K3QTDL4LXw2F7HEK3wJUD2nW2nRk4stbPy6cq3jPPqjiChkVvvNKmPGJxWUtg6LnF5kejMRNNU3TGtRBeJgk33yuGBxrMPHi")
	f.Add("xpub661MyMwAqRbcFtXgS5sYJABqqG9YLmC4Q1Rdap9gSE8NqtwybGhePY2gZ29ESFjqJoCu1Rupje8YtGqsefD265TMg7usUDFdp6W1EGMcet8")
	f.Add("xpub6DyUKdwoLWmUJ4Tn9Bbsdtx7B5Ws18mEN19e5HT52ikE53FiUheSQXrZUNPovqfyKmw4579A1Mm3GXXKM39N64uooBfJ4tNAzFsEbodRTx4")
	f.Add("xpub661MyMwAqRbcEYS8w7XLSVeEsBXy79zSzH1J8vCdxAZningWLdN3zgtU6Q5JXayek4PRsn35jii4veMimro1xefsM58PgBMrvdYre8QyULY")
	f.Add("")
	f.Add("1111")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseExtendedKey(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidExtendedKey) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			if len(s) >= 8 && strings.Contains(err.Error(), s) {
				t.Fatalf("error echoes the input")
			}
			return
		}
		if got := k.Serialize(); got != s {
			t.Fatalf("round trip: got %q", got)
		}
	})
}
