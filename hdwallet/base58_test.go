package hdwallet

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBase58_KnownVectors(t *testing.T) {
	t.Parallel()
	// From Bitcoin Core's src/test/data/base58_encode_decode.json.
	cases := []struct{ hex, b58 string }{
		{"", ""},
		{"61", "2g"},
		{"626262", "a3gV"},
		{"636363", "aPEr"},
		{"73696d706c792061206c6f6e6720737472696e67", "2cFupjhnEsSn59qHXstmK2ffpLv2"},
		{"00eb15231dfceb60925886b67d065299925915aeb172c06647", "1NS17iag9jJgTHD1VXjvLCEnZuQ3rJDE9L"},
		{"516b6fcd0f", "ABnLTmg"},
		{"bf4f89001e670274dd", "3SEo3LWLoPntC"},
		{"572e4794", "3EFU7m"},
		{"ecac89cad93923c02321", "EJDM8drfXA6uyA"},
		{"10c8511e", "Rt5zm"},
		{"00000000000000000000", "1111111111"},
		{"000111d38e5fc9071ffcd20b4a763cc9ae4f252bb4e48fd66a835e252ada93ff480d6dd43dc62a641155a5", "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"},
	}
	for _, c := range cases {
		raw, err := hex.DecodeString(c.hex)
		require.NoError(t, err)
		require.Equal(t, c.b58, base58Encode(raw), "encode %s", c.hex)
		got, err := base58Decode(c.b58)
		require.NoError(t, err)
		require.Equal(t, raw, got, "decode %s", c.b58)
	}
}

func TestBase58_RoundTripsRandomBytes(t *testing.T) {
	t.Parallel()
	for n := 0; n < 100; n++ {
		b := make([]byte, n)
		_, _ = rand.Read(b)
		if n > 2 {
			b[0], b[1] = 0, 0 // leading zeros must survive
		}
		got, err := base58Decode(base58Encode(b))
		require.NoError(t, err)
		require.True(t, bytes.Equal(b, got), "length %d", n)
	}
}

func TestBase58Decode_RejectsCharactersOutsideAlphabet(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"0", "O", "I", "l", "abc+", "ab c", "é"} {
		_, err := base58Decode(s)
		require.ErrorIs(t, err, errBase58Char, s)
	}
}

func TestBase58Check_DetectsCorruption(t *testing.T) {
	t.Parallel()
	s := base58CheckEncode([]byte("payload"))
	got, err := base58CheckDecode(s)
	require.NoError(t, err)
	require.Equal(t, []byte("payload"), got)

	bad := []byte(s)
	if bad[3] == '2' {
		bad[3] = '3'
	} else {
		bad[3] = '2'
	}
	_, err = base58CheckDecode(string(bad))
	require.ErrorIs(t, err, errBase58Checksum)

	_, err = base58CheckDecode("2g")
	require.ErrorIs(t, err, errBase58Short)
}
