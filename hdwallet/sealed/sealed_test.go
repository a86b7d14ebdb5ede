package sealed_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hdwallet/awskms"
	"github.com/evmpay/evmpay/hdwallet/awskms/kmstest"
	"github.com/evmpay/evmpay/hdwallet/pkcs11key"
	"github.com/evmpay/evmpay/hdwallet/pkcs11key/softhsmtest"
	"github.com/evmpay/evmpay/hdwallet/sealed"
)

var (
	_ sealed.KeyWrapper = (*pkcs11key.Wrapper)(nil)
	_ sealed.KeyWrapper = (*awskms.Wrapper)(nil)
)

var ctx = context.Background()

const phrase = "test test test test test test test test test test test junk"

// wrappers are the real key stores: a SoftHSM2 token's AES key and a KMS
// emulator's symmetric key.
func wrappers(t *testing.T) map[string]sealed.KeyWrapper {
	t.Helper()
	tok, err := pkcs11key.Open(softhsmtest.New(t).Config())
	require.NoError(t, err)
	t.Cleanup(func() { _ = tok.Close() })
	hsm, err := tok.GenerateWrapKey(ctx, "seal")
	require.NoError(t, err)
	hsm2, err := tok.GenerateWrapKey(ctx, "seal-2")
	require.NoError(t, err)

	e := kmstest.Start(t)
	id, err := awskms.CreateWrapKey(ctx, e.Client(), "seal")
	require.NoError(t, err)
	id2, err := awskms.CreateWrapKey(ctx, e.Client(), "seal-2")
	require.NoError(t, err)
	return map[string]sealed.KeyWrapper{
		"pkcs11": hsm, "pkcs11-other": hsm2,
		"awskms": awskms.NewWrapper(e.Client(), id), "awskms-other": awskms.NewWrapper(e.Client(), id2),
	}
}

func TestSealOpen(t *testing.T) {
	t.Parallel()
	ws := wrappers(t)
	for _, provider := range []string{"pkcs11", "awskms"} {
		t.Run(provider, func(t *testing.T) {
			w, other := ws[provider], ws[provider+"-other"]
			file, err := sealed.Seal(ctx, w, "PAY_MNEMONIC", []byte(phrase))
			require.NoError(t, err)
			require.NotContains(t, string(file), "junk", "no plaintext in the file")

			h, err := sealed.ParseHeader(file)
			require.NoError(t, err)
			require.Equal(t, sealed.Header{Version: 1, Name: "PAY_MNEMONIC", Provider: provider, KeyID: w.KeyID()}, h)

			s, err := sealed.Open(ctx, w, "PAY_MNEMONIC", file)
			require.NoError(t, err)
			require.Equal(t, phrase, string(s.Bytes()))
			require.True(t, s.Locked(), "mlock'ed (root, or RLIMIT_MEMLOCK allows a page)")
			require.Equal(t, "[REDACTED] [REDACTED] [REDACTED]", fmt.Sprintf("%v %s %x", s, s, s))
			s.Destroy()
			require.Nil(t, s.Bytes())

			// Another secret's slot, another key, an altered file: refused,
			// never a wrong plaintext.
			_, err = sealed.Open(ctx, w, "PAY_SECRET_KEY", file)
			require.ErrorContains(t, err, "holds PAY_MNEMONIC, not PAY_SECRET_KEY")
			_, err = sealed.Open(ctx, other, "PAY_MNEMONIC", file)
			require.ErrorContains(t, err, "is wrapped by "+provider+" key "+w.KeyID())

			var raw map[string]any
			require.NoError(t, json.Unmarshal(file, &raw))
			raw["name"] = "PAY_SECRET_KEY" // relabelled: the header is bound
			relabelled, _ := json.Marshal(raw)
			_, err = sealed.Open(ctx, w, "PAY_SECRET_KEY", relabelled)
			require.Error(t, err)
			raw["name"] = "PAY_MNEMONIC"
			raw["key_id"] = other.KeyID() // pointed at another key
			repointed, _ := json.Marshal(raw)
			_, err = sealed.Open(ctx, other, "PAY_MNEMONIC", repointed)
			require.Error(t, err)
			tampered := strings.Replace(string(file), `"ciphertext":"`, `"ciphertext":"AA`, 1)
			_, err = sealed.Open(ctx, w, "PAY_MNEMONIC", []byte(tampered))
			require.Error(t, err)
		})
	}
}

func TestParseHeader_PlaintextIsNotSealed(t *testing.T) {
	t.Parallel()
	for _, b := range []string{phrase, "", "0xabc", "{}", `{"evmpay_sealed":0}`} {
		_, err := sealed.ParseHeader([]byte(b))
		require.ErrorIs(t, err, sealed.ErrNotSealed, "%q", b)
		require.False(t, sealed.IsSealed([]byte(b)))
	}
	_, err := sealed.ParseHeader([]byte(`{"evmpay_sealed":2,"name":"x","provider":"y","key_id":"z"}`))
	require.ErrorContains(t, err, "version 2 is not supported")
}
