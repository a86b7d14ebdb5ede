package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hdwallet"
)

// secretFileReaders are every place payd reads a secret from a file, each
// reading path and returning the value it read (or the error).
func secretFileReaders(t *testing.T) map[string]func(path string) (string, error) {
	ctx := context.Background()
	fromProvider := func(name string) func(string) (string, error) {
		return func(path string) (string, error) {
			v, err := fileProvider{getenv: envOf(map[string]string{name + "_FILE": path})}.Secret(ctx, name)
			return string(v), err
		}
	}
	return map[string]func(string) (string, error){
		"PAY_MNEMONIC_FILE":           fromProvider(secretMnemonic),
		"PAY_SECRET_KEY_FILE":         fromProvider(secretKey),
		"GAS_FUNDER_PRIVATE_KEY_FILE": fromProvider(secretGasFunder),
		"PAY_ADMIN_TOKEN_FILE":        fromProvider(secretAdmin),
		// serve's keyring reads the same files (sealed or plaintext); the
		// plaintext warning is no substitute for the refusal.
		"PAY_MNEMONIC_FILE (keyring)": func(path string) (string, error) {
			var log bytes.Buffer
			kr, err := newKeyring(ctx, envOf(map[string]string{"PAY_MNEMONIC_FILE": path}), slog.New(slog.NewTextHandler(&log, nil)))
			require.NoError(t, err)
			v, err := kr.Secret(ctx, secretMnemonic)
			if err != nil {
				require.Empty(t, log.String(), "a refused file is not logged as a plaintext secret")
			}
			return string(v), err
		},
		"RPC_URL_FILE": func(path string) (string, error) {
			return nodeURL(envOf(map[string]string{"RPC_URL_FILE": path}))
		},
		"payd pay: --key-file": func(path string) (string, error) {
			k, err := payerKey(path)
			if err != nil {
				return "", err
			}
			return hex.EncodeToString(crypto.FromECDSA(k)), nil
		},
	}
}

// A secret file that group or others may access is refused, as ssh
// refuses a private key with open permissions, with the chmod to run; a
// file private to payd's user is read.
func TestSecretFiles_OpenToGroupOrOthers_RefusedWithTheChmod(t *testing.T) {
	t.Parallel()
	m, err := hdwallet.GenerateMnemonic(12)
	require.NoError(t, err)
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	values := map[string]string{
		"PAY_MNEMONIC_FILE":           m.Phrase(),
		"PAY_MNEMONIC_FILE (keyring)": m.Phrase(),
		"PAY_SECRET_KEY_FILE":         "a-secret-key-of-at-least-thirty-two-bytes",
		"GAS_FUNDER_PRIVATE_KEY_FILE": hex.EncodeToString(crypto.FromECDSA(key)),
		"PAY_ADMIN_TOKEN_FILE":        "operator-token-for-tests",
		"RPC_URL_FILE":                "https://node.example/v3/0123456789abcdef0123",
		"payd pay: --key-file":        hex.EncodeToString(crypto.FromECDSA(key)),
	}
	for setting, read := range secretFileReaders(t) {
		for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o620, 0o660} {
			path := filepath.Join(t.TempDir(), "secret file")
			require.NoError(t, os.WriteFile(path, []byte(values[setting]+"\n"), 0o600))
			require.NoError(t, os.Chmod(path, mode)) // exactly, whatever the umask
			_, err := read(path)
			require.Error(t, err, "%s with mode %04o", setting, mode)
			require.ErrorContains(t, err, fmt.Sprintf("chmod 600 '%s'", path), "%s with mode %04o", setting, mode)
			require.ErrorContains(t, err, fmt.Sprintf("%04o", mode))
			require.NotContains(t, err.Error(), values[setting], "the error never holds the secret")
		}
		for _, mode := range []os.FileMode{0o600, 0o400} {
			path := filepath.Join(t.TempDir(), "secret")
			require.NoError(t, os.WriteFile(path, []byte(values[setting]+"\n"), 0o600))
			require.NoError(t, os.Chmod(path, mode))
			got, err := read(path)
			require.NoError(t, err, "%s with mode %04o", setting, mode)
			require.Equal(t, values[setting], got)
		}
	}
}

// The PKCS#11 PIN file is checked before the HSM is asked anything.
func TestSecretFiles_PKCS11PINOpenToOthers_Refused(t *testing.T) {
	t.Parallel()
	env := func(pin string) func(string) string {
		return envOf(map[string]string{"PAY_KEYS_PROVIDER": "pkcs11", "PAY_PKCS11_MODULE": filepath.Join(t.TempDir(), "no-such-module.so"),
			"PAY_PKCS11_TOKEN": "evmpay", "PAY_PKCS11_PIN_FILE": pin})
	}
	for _, mode := range []os.FileMode{0o644, 0o640} {
		pin := filepath.Join(t.TempDir(), "pin")
		require.NoError(t, os.WriteFile(pin, []byte("84736251\n"), 0o600))
		require.NoError(t, os.Chmod(pin, mode))
		_, err := newKeyring(context.Background(), env(pin), slog.New(slog.DiscardHandler))
		require.ErrorContains(t, err, "PAY_PKCS11_PIN_FILE")
		require.ErrorContains(t, err, "chmod 600 "+pin)
		require.NotContains(t, err.Error(), "84736251")
	}
	for _, mode := range []os.FileMode{0o600, 0o400} {
		pin := filepath.Join(t.TempDir(), "pin")
		require.NoError(t, os.WriteFile(pin, []byte("84736251\n"), 0o600))
		require.NoError(t, os.Chmod(pin, mode))
		_, err := newKeyring(context.Background(), env(pin), slog.New(slog.DiscardHandler))
		// Accepted: payd goes on to load the (missing) PKCS#11 module.
		require.ErrorContains(t, err, "PAY_KEYS_PROVIDER=pkcs11")
		require.NotContains(t, err.Error(), "chmod")
	}
}

// `payd secrets seal --in FILE` refuses an open plaintext file before it
// asks the HSM or KMS anything.
func TestSecretFiles_SealInputOpenToOthers_Refused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := filepath.Join(dir, "mnemonic")
	require.NoError(t, os.WriteFile(in, []byte("test test test test test test test test test test test junk\n"), 0o600))
	require.NoError(t, os.Chmod(in, 0o644))
	var out bytes.Buffer
	err := run(context.Background(), []string{"secrets", "seal", secretMnemonic, "--out", filepath.Join(dir, "sealed"), "--in", in}, &out)
	require.ErrorContains(t, err, "chmod 600 "+in)
	require.NotContains(t, err.Error(), "junk")
	require.NoFileExists(t, filepath.Join(dir, "sealed"))
}

func TestShellQuote(t *testing.T) {
	t.Parallel()
	require.Equal(t, "/etc/payd/pin", shellQuote("/etc/payd/pin"))
	require.Equal(t, "'/etc/pay d/it'\\''s'", shellQuote("/etc/pay d/it's"))
}
