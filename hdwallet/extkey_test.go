package hdwallet

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/stretchr/testify/require"
)

type bip32File struct {
	Vectors []struct {
		Name   string
		Seed   string
		Chains []struct{ Path, Xpub, Xprv string }
	}
	Invalid []struct{ Key, Reason string }
}

func loadBIP32Vectors(t *testing.T) bip32File {
	t.Helper()
	raw, err := os.ReadFile("testdata/bip32-vectors.json")
	require.NoError(t, err)
	var f bip32File
	require.NoError(t, json.Unmarshal(raw, &f))
	require.Len(t, f.Vectors, 3)
	return f
}

func TestExtendedKey_BIP32Vectors(t *testing.T) {
	t.Parallel()
	for _, v := range loadBIP32Vectors(t).Vectors {
		t.Run(v.Name, func(t *testing.T) {
			t.Parallel()
			seed, err := hex.DecodeString(v.Seed)
			require.NoError(t, err)
			master, err := NewMasterKey(seed)
			require.NoError(t, err)
			for _, c := range v.Chains {
				path, err := ParsePath(c.Path)
				require.NoError(t, err, c.Path)
				require.Equal(t, c.Path, path.String())

				k, err := master.Derive(path)
				require.NoError(t, err, c.Path)
				require.True(t, k.IsPrivate())
				require.Equal(t, c.Xprv, k.Serialize(), "xprv at %s", c.Path)
				require.Equal(t, c.Xpub, k.Public().Serialize(), "xpub at %s", c.Path)
				require.Equal(t, uint8(len(path)), k.Depth())

				// Both strings parse back to the same key.
				prv, err := ParseExtendedKey(c.Xprv)
				require.NoError(t, err)
				require.Equal(t, c.Xprv, prv.Serialize())
				pub, err := ParseExtendedKey(c.Xpub)
				require.NoError(t, err)
				require.False(t, pub.IsPrivate())
				require.Equal(t, c.Xpub, pub.Serialize())
				require.Equal(t, k.Address(), pub.Address())
			}
		})
	}
}

func TestExtendedKey_PublicDerivationMatchesPrivateForNonHardened(t *testing.T) {
	t.Parallel()
	// Vector 1: m/0'/1/2'/2/1000000000 ends with two non-hardened steps,
	// derivable from the xpub at m/0'/1/2'.
	parent, err := ParseExtendedKey("xpub6D4BDPcP2GT577Vvch3R8wDkScZWzQzMMUm3PWbmWvVJrZwQY4VUNgqFJPMM3No2dFDFGTsxxpG5uJh7n7epu4trkrX7x7DogT5Uv6fcLW5")
	require.NoError(t, err)
	k, err := parent.Derive(Path{2, 1000000000})
	require.NoError(t, err)
	require.Equal(t, "xpub6H1LXWLaKsWFhvm6RVpEL9P4KfRZSW7abD2ttkWP3SSQvnyA8FSVqNTEcYFgJS2UaFcxupHiYkro49S8yGasTvXEYBVPamhGW6cFJodrTHy", k.Serialize())
}

func TestExtendedKey_HardenedChildOfPublicKey_ErrHardenedFromPublic(t *testing.T) {
	t.Parallel()
	pub, err := ParseExtendedKey("xpub661MyMwAqRbcFtXgS5sYJABqqG9YLmC4Q1Rdap9gSE8NqtwybGhePY2gZ29ESFjqJoCu1Rupje8YtGqsefD265TMg7usUDFdp6W1EGMcet8")
	require.NoError(t, err)
	_, err = pub.Child(HardenedOffset)
	require.ErrorIs(t, err, ErrHardenedFromPublic)
	_, err = pub.ECDSAPrivateKey()
	require.ErrorIs(t, err, ErrInvalidExtendedKey)
}

func TestParseExtendedKey_RejectsBIP32Vector5(t *testing.T) {
	t.Parallel()
	// Each invalid key must fail for its stated reason, which also proves the
	// typed-in keys carry valid checksums (except the checksum case).
	want := map[string]string{
		"pubkey version / prvkey mismatch":            "must be compressed",
		"prvkey version / pubkey mismatch":            "must start with 0x00",
		"invalid pubkey prefix 04":                    "must be compressed",
		"invalid prvkey prefix 04":                    "must start with 0x00",
		"invalid pubkey prefix 01":                    "must be compressed",
		"invalid prvkey prefix 01":                    "must start with 0x00",
		"zero depth with non-zero parent fingerprint": "depth 0",
		"zero depth with non-zero index":              "depth 0",
		"unknown extended key version":                "unknown version",
		"private key 0 not in 1..n-1":                 "not in [1, n-1]",
		"private key n not in 1..n-1":                 "not in [1, n-1]",
		"invalid pubkey 020000000000000000000000000000000000000000000000000000000000000007": "not a point on the curve",
		"invalid checksum": "checksum",
	}
	invalid := loadBIP32Vectors(t).Invalid
	require.Len(t, invalid, 16)
	for _, c := range invalid {
		_, err := ParseExtendedKey(c.Key)
		require.ErrorIs(t, err, ErrInvalidExtendedKey, c.Reason)
		require.Contains(t, err.Error(), want[c.Reason], c.Reason)
		require.NotContains(t, err.Error(), c.Key[4:20], "the error never echoes the key")
	}
}

func TestParseExtendedKey_RejectsGarbage(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "xpub", "not base58 0OIl", strings.Repeat("1", 111), base58CheckEncode(make([]byte, 77))} {
		_, err := ParseExtendedKey(s)
		require.ErrorIs(t, err, ErrInvalidExtendedKey, "%q", s)
	}
}

func TestNewMasterKey_SeedLength(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 15, 65} {
		_, err := NewMasterKey(make([]byte, n))
		require.ErrorIs(t, err, ErrSeedLength)
	}
	for _, n := range []int{16, 64} {
		_, err := NewMasterKey(make([]byte, n))
		require.NoError(t, err)
	}
}

func TestExtendedKey_PrivateKeyRedactedPublicKeyShown(t *testing.T) {
	t.Parallel()
	const xprv = "xprv9s21ZrQH143K3QTDL4LXw2F7HEK3wJUD2nW2nRk4stbPy6cq3jPPqjiChkVvvNKmPGJxWUtg6LnF5kejMRNNU3TGtRBeJgk33yuGBxrMPHi"
	const xpub = "xpub661MyMwAqRbcFtXgS5sYJABqqG9YLmC4Q1Rdap9gSE8NqtwybGhePY2gZ29ESFjqJoCu1Rupje8YtGqsefD265TMg7usUDFdp6W1EGMcet8"
	k, err := ParseExtendedKey(xprv)
	require.NoError(t, err)
	priv, err := k.ECDSAPrivateKey()
	require.NoError(t, err)
	privHex := hex.EncodeToString(priv.D.Bytes())
	out := fmt.Sprintf("%v %+v %#v %s %q %x %d", k, k, k, k, k, k, k) +
		fmt.Sprintf("%v %+v %#v %s %x %d", *k, *k, *k, *k, *k, *k) + k.String()
	require.NotContains(t, out, xprv[4:])
	require.NotContains(t, out, privHex)
	require.NotContains(t, out, strings.ToUpper(privHex))
	require.Contains(t, out, "REDACTED")

	require.Equal(t, xpub, k.Public().String())
	require.Equal(t, xpub, fmt.Sprint(k.Public()))
}

func TestParsePath(t *testing.T) {
	t.Parallel()
	good := map[string]Path{
		"m":                    {},
		"m/0":                  {0},
		"m/44'/60'/0'/0/7":     {44 + HardenedOffset, 60 + HardenedOffset, HardenedOffset, 0, 7},
		"m/44h/60H/0'/0":       {44 + HardenedOffset, 60 + HardenedOffset, HardenedOffset, 0},
		"m/2147483647'":        {MaxIndex + HardenedOffset},
		"m/2147483647/0":       {MaxIndex, 0},
		"m/0/2147483647'/1/2h": {0, MaxIndex + HardenedOffset, 1, 2 + HardenedOffset},
	}
	for s, want := range good {
		got, err := ParsePath(s)
		require.NoError(t, err, s)
		require.Equal(t, want, got, s)
	}
	for _, s := range []string{
		"", "M/0", "/0", "m/", "m//0", "m/-1", "m/+1", "m/01", "m/0x1", "m/1''",
		"m/2147483648", "m/2147483648'", "m/4294967296", "m/1 ", "m/ 1", "m/1/",
		"m" + strings.Repeat("/0", 256),
	} {
		_, err := ParsePath(s)
		require.ErrorIs(t, err, ErrInvalidPath, "%q", s)
	}
}

func TestDepositPath(t *testing.T) {
	t.Parallel()
	p, err := DepositPath(7)
	require.NoError(t, err)
	require.Equal(t, "m/44'/60'/0'/0/7", p.String())
	p, err = DepositPath(MaxIndex)
	require.NoError(t, err)
	require.Equal(t, "m/44'/60'/0'/0/2147483647", p.String())
	_, err = DepositPath(MaxIndex + 1)
	require.ErrorIs(t, err, ErrIndexOutOfRange)

	// DepositPath does not alias the shared account path.
	a, _ := DepositPath(1)
	b, _ := DepositPath(2)
	require.NotEqual(t, a, b)
	require.Equal(t, AccountPath, accountPath.String())
}

func TestExtendedKey_FingerprintsLinkParentAndChild(t *testing.T) {
	t.Parallel()
	seed, _ := hex.DecodeString("000102030405060708090a0b0c0d0e0f")
	master, err := NewMasterKey(seed)
	require.NoError(t, err)
	fp := master.Fingerprint()
	require.Equal(t, "3442193e", hex.EncodeToString(fp[:]), "BIP-32 vector 1 master fingerprint")
	child, err := master.Child(HardenedOffset)
	require.NoError(t, err)
	require.Equal(t, master.Fingerprint(), child.ParentFingerprint())
	require.Equal(t, HardenedOffset, child.ChildIndex())
	require.Equal(t, [4]byte{}, master.ParentFingerprint())

	// The go-ethereum key forms agree with each other and with Address.
	priv, err := child.ECDSAPrivateKey()
	require.NoError(t, err)
	pub := child.Public().ECDSAPublicKey()
	require.True(t, priv.PublicKey.Equal(pub))
	require.Equal(t, child.Address(), crypto.PubkeyToAddress(*pub))
}

func TestExtendedKey_StringAndLogValue(t *testing.T) {
	t.Parallel()
	seed, _ := hex.DecodeString("000102030405060708090a0b0c0d0e0f")
	master, err := NewMasterKey(seed)
	require.NoError(t, err)
	require.Equal(t, "[REDACTED]", master.String())
	require.Equal(t, "hdwallet.ExtendedKey{[REDACTED]}", master.GoString())
	require.Equal(t, "[REDACTED]", master.LogValue().String())
	xpub := master.Public().Serialize()
	require.Equal(t, "hdwallet.ExtendedKey{"+xpub+"}", master.Public().GoString())
	require.Equal(t, xpub, master.Public().LogValue().String())
}
