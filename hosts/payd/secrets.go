package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"

	"github.com/ethereum/go-ethereum/crypto"

	"github.com/evmpay/evmpay/hdwallet"
)

// Secret names. Each is read from <NAME>_FILE in production; the bare
// environment variable is accepted only in development mode.
const (
	secretMnemonic  = "PAY_MNEMONIC"
	secretKey       = "PAY_SECRET_KEY"
	secretGasFunder = "GAS_FUNDER_PRIVATE_KEY"
	secretAdmin     = "PAY_ADMIN_TOKEN"
)

// errSecretMissing reports a secret the chosen roles need but nobody set.
var errSecretMissing = errors.New("secret not configured")

// KeyProvider supplies secrets by name. The host ships two: files named by
// <NAME>_FILE (production) and the environment with generated fallbacks
// (development). A KMS or HSM client plugs in by implementing it.
type KeyProvider interface {
	Secret(ctx context.Context, name string) ([]byte, error)
}

// fileProvider reads secrets from the files named by <NAME>_FILE and refuses
// secrets passed in the environment: environment variables leak into process
// listings, crash dumps and child processes.
type fileProvider struct {
	getenv func(string) string
}

func (p fileProvider) Secret(_ context.Context, name string) ([]byte, error) {
	if p.getenv(name) != "" {
		return nil, fmt.Errorf("%s is set in the environment, which payd accepts only in development mode (`payd dev`): environment variables leak into process listings and child processes. Put the secret in a file readable only by payd and set %s_FILE to its path", name, name)
	}
	path := p.getenv(name + "_FILE")
	if path == "" {
		return nil, fmt.Errorf("%w: set %s_FILE to the path of a file holding %s", errSecretMissing, name, name)
	}
	b, err := readSecretFile(name+"_FILE", path)
	if err != nil {
		return nil, err
	}
	v := []byte(strings.TrimSpace(string(b)))
	if len(v) == 0 {
		return nil, fmt.Errorf("%s_FILE: %s is empty", name, path)
	}
	return v, nil
}

// maxSecretFile bounds what is read of a secret file: every secret payd
// reads is a line or a sealed file of a few hundred bytes.
const maxSecretFile = 1 << 20

// readSecretFile reads a file holding a secret (a mnemonic, a key, a PIN,
// a node URL with its key, sealed or not), named by setting in errors. As
// ssh refuses a private key whose file group or others may access, it
// refuses a file whose mode grants group or others anything: a secret
// others could read may already be theirs, and one they could write may be
// replaced (a mnemonic of theirs would take the deposits). The error says
// the chmod to run. The mode is that of the file opened (a symbolic link
// is followed, as Kubernetes mounts secrets).
func readSecretFile(setting, path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", setting, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", setting, err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 && runtime.GOOS != "windows" {
		return nil, fmt.Errorf("%s: %s holds a secret but its mode %04o lets group or others access it; "+
			"payd refuses it, as ssh refuses an open private key: run `chmod 600 %s`",
			setting, path, perm, shellQuote(path))
	}
	b, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", setting, err)
	}
	if len(b) > maxSecretFile {
		return nil, fmt.Errorf("%s: %s is larger than %d bytes: not a secret file", setting, path, maxSecretFile)
	}
	return b, nil
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_./:@%+=,-]+$`)

// shellQuote quotes s for a POSIX shell when it needs quoting.
func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// devProvider takes secrets from the environment when set, and otherwise
// from a file of generated development secrets in the data directory
// (created on first use), so that restarts keep the same wallet and keys.
type devProvider struct {
	getenv func(string) string
	path   string
	values map[string]string
}

func newDevProvider(getenv func(string) string, dataDir string) (*devProvider, error) {
	p := &devProvider{getenv: getenv, path: filepath.Join(dataDir, "dev-secrets.json"), values: map[string]string{}}
	b, err := os.ReadFile(p.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		if err := json.Unmarshal(b, &p.values); err != nil {
			return nil, fmt.Errorf("%s: %w (delete it to generate new development secrets)", p.path, err)
		}
	}
	changed := false
	for _, name := range []string{secretMnemonic, secretKey, secretGasFunder, secretAdmin} {
		if p.values[name] != "" {
			continue
		}
		v, err := generateSecret(name)
		if err != nil {
			return nil, err
		}
		p.values[name] = v
		changed = true
	}
	if changed {
		b, _ := json.MarshalIndent(p.values, "", "  ")
		if err := os.WriteFile(p.path, b, 0o600); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (p *devProvider) Secret(_ context.Context, name string) ([]byte, error) {
	if v := p.getenv(name); v != "" {
		return []byte(strings.TrimSpace(v)), nil
	}
	if v := p.values[name]; v != "" {
		return []byte(v), nil
	}
	return nil, fmt.Errorf("%w: %s", errSecretMissing, name)
}

func generateSecret(name string) (string, error) {
	switch name {
	case secretMnemonic:
		m, err := hdwallet.GenerateMnemonic(24)
		if err != nil {
			return "", err
		}
		return m.Phrase(), nil
	case secretGasFunder:
		k, err := crypto.GenerateKey()
		if err != nil {
			return "", err
		}
		return hex.EncodeToString(crypto.FromECDSA(k)), nil
	default:
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return "", err
		}
		return base64.RawURLEncoding.EncodeToString(b), nil
	}
}

// loadWallet builds the HD wallet from the mnemonic secret.
func loadWallet(ctx context.Context, kp KeyProvider) (*hdwallet.Wallet, error) {
	phrase, err := kp.Secret(ctx, secretMnemonic)
	if err != nil {
		return nil, err
	}
	m, err := hdwallet.ParseMnemonic(string(phrase))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", secretMnemonic, err)
	}
	return hdwallet.NewWallet(m, "")
}

// loadSecretKey returns PAY_SECRET_KEY's bytes (at least 32).
func loadSecretKey(ctx context.Context, kp KeyProvider) ([]byte, error) {
	k, err := kp.Secret(ctx, secretKey)
	if err != nil {
		return nil, err
	}
	if len(k) < 32 {
		return nil, fmt.Errorf("%s must be at least 32 bytes (generate one with `openssl rand -base64 32`)", secretKey)
	}
	return k, nil
}

// loadGasFunder parses GAS_FUNDER_PRIVATE_KEY (hex, with or without 0x).
func loadGasFunder(ctx context.Context, kp KeyProvider) (*ecdsa.PrivateKey, error) {
	b, err := kp.Secret(ctx, secretGasFunder)
	if err != nil {
		return nil, err
	}
	k, err := crypto.HexToECDSA(strings.TrimPrefix(string(b), "0x"))
	if err != nil {
		return nil, fmt.Errorf("%s: not a hex secp256k1 private key", secretGasFunder)
	}
	return k, nil
}

// loadAdminToken returns the operator token (at least 16 bytes).
func loadAdminToken(ctx context.Context, kp KeyProvider) (string, error) {
	b, err := kp.Secret(ctx, secretAdmin)
	if err != nil {
		return "", err
	}
	if len(b) < 16 {
		return "", fmt.Errorf("%s must be at least 16 characters", secretAdmin)
	}
	return string(b), nil
}
