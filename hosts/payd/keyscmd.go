package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/ethereum/go-ethereum/crypto"

	"github.com/evmpay/evmpay/hdwallet"
	"github.com/evmpay/evmpay/hdwallet/awskms"
	"github.com/evmpay/evmpay/hdwallet/sealed"
)

// sealable are the secrets `payd secrets seal` seals.
var sealable = []string{secretMnemonic, secretKey, secretGasFunder, secretAdmin}

// runSecrets is `payd secrets seal NAME --out FILE [--in FILE]`: it reads
// the plaintext once (standard input by default, so it need never touch
// the disk), checks it as serve will, and writes the sealed file wrapped by
// PAY_SEAL_KEY in PAY_KEYS_PROVIDER.
func runSecrets(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	const use = "usage: payd secrets seal NAME --out FILE [--in FILE|-]   (NAME: PAY_MNEMONIC, PAY_SECRET_KEY, GAS_FUNDER_PRIVATE_KEY, PAY_ADMIN_TOKEN)"
	if len(args) < 2 || args[0] != "seal" {
		return usageError(use)
	}
	name := args[1]
	if !contains(sealable, name) {
		return usageError(fmt.Sprintf("payd secrets seal: %q is not a secret payd reads; %s", name, use))
	}
	fs := newFlagSet("secrets seal")
	out := fs.String("out", "", "the sealed file to write (refused if it exists)")
	in := fs.String("in", "-", "the plaintext: a file, or - for standard input")
	if err := parseFlags(fs, args[2:]); err != nil {
		return err
	}
	if *out == "" {
		return usageError("payd secrets seal: --out is required; " + use)
	}
	// A plaintext file is checked first, like every secret file payd
	// reads (secrets.go): one that group or others may access is refused
	// before anything is asked of the HSM or KMS.
	var plain []byte
	if *in != "-" {
		b, err := readSecretFile("payd secrets seal: --in", *in)
		if err != nil {
			return err
		}
		plain = b
	}
	defer func() { clear(plain) }()
	kr, err := newKeyring(ctx, os.Getenv, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	defer kr.Close()
	if kr.env.provider == providerFile || kr.env.sealKey == "" {
		return errors.New("payd secrets seal: set PAY_KEYS_PROVIDER (pkcs11 or awskms) and PAY_SEAL_KEY (the wrapping key's label or KMS key id; `payd keys create --kind wrap` makes one)")
	}
	if *in == "-" {
		if plain, err = io.ReadAll(io.LimitReader(stdin, 1<<16)); err != nil {
			return fmt.Errorf("payd secrets seal: read the plaintext: %w", err)
		}
	}
	v := []byte(strings.TrimSpace(string(plain)))
	defer clear(v)
	if err := checkSecret(name, v); err != nil {
		return fmt.Errorf("payd secrets seal: %w", err)
	}
	keyID := kr.env.sealKey
	if kr.env.provider == providerPKCS11 {
		keyID = kr.env.pkcs11Token + "/" + keyID
	}
	w, err := kr.wrapper(ctx, kr.env.provider, keyID)
	if err != nil {
		return fmt.Errorf("payd secrets seal: PAY_SEAL_KEY: %w", err)
	}
	file, err := sealed.Seal(ctx, w, name, v)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("payd secrets seal: %w", err)
	}
	if _, err := f.Write(file); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s sealed by %s key %s into %s; point %s_FILE at it and delete the plaintext\n", name, w.Provider(), w.KeyID(), *out, name)
	return nil
}

// checkSecret checks a plaintext as serve will read it, so that a typo is
// found before the secret is sealed.
func checkSecret(name string, v []byte) error {
	kp := staticSecret{name: name, v: v}
	var err error
	switch name {
	case secretMnemonic:
		var w *hdwallet.Wallet
		if w, err = loadWallet(context.Background(), kp); err == nil {
			w.Wipe()
		}
	case secretKey:
		_, err = loadSecretKey(context.Background(), kp)
	case secretGasFunder:
		_, err = loadGasFunder(context.Background(), kp)
	case secretAdmin:
		_, err = loadAdminToken(context.Background(), kp)
	}
	return err
}

type staticSecret struct {
	name string
	v    []byte
}

func (s staticSecret) Secret(_ context.Context, name string) ([]byte, error) {
	if name != s.name {
		return nil, errSecretMissing
	}
	return s.v, nil
}

// runKeys is `payd keys create --kind signing|wrap --label L` and `payd
// keys import --label L` (a hex private key on standard input; PKCS#11
// only): keys made in the provider, their private halves never leaving it.
func runKeys(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	const use = "usage: payd keys create --kind signing|wrap --label LABEL | payd keys import --label LABEL < hex-key"
	if len(args) == 0 || (args[0] != "create" && args[0] != "import") {
		return usageError(use)
	}
	fs := newFlagSet("keys " + args[0])
	kind := fs.String("kind", "signing", "signing (a secp256k1 key for the sweep wallet or gas funder) or wrap (seals secrets)")
	label := fs.String("label", "", "the key's label in the token (pkcs11) or description (awskms)")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if *label == "" {
		return usageError("payd keys: --label is required; " + use)
	}
	kr, err := newKeyring(ctx, os.Getenv, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	defer kr.Close()
	if args[0] == "import" {
		if kr.env.provider != providerPKCS11 {
			return errors.New("payd keys import: only PAY_KEYS_PROVIDER=pkcs11 imports keys here; import into KMS with AWS's tools")
		}
		b, err := io.ReadAll(io.LimitReader(stdin, 1024))
		if err != nil {
			return err
		}
		key, err := crypto.HexToECDSA(strings.TrimPrefix(strings.TrimSpace(string(b)), "0x"))
		clear(b)
		if err != nil {
			return errors.New("payd keys import: standard input is not a hex secp256k1 private key")
		}
		s, err := kr.tok.ImportKey(ctx, *label, key)
		key.D.SetInt64(0)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "imported %s address=%s\n", s.KeyID(), s.Address().Hex())
		return nil
	}
	switch {
	case kr.env.provider == providerPKCS11 && *kind == "signing":
		s, err := kr.tok.GenerateKey(ctx, *label)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "created %s key_id=%s address=%s\n", *kind, *label, s.Address().Hex())
	case kr.env.provider == providerPKCS11 && *kind == "wrap":
		w, err := kr.tok.GenerateWrapKey(ctx, *label)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "created %s key_id=%s (%s)\n", *kind, *label, w.KeyID())
	case kr.env.provider == providerAWSKMS && *kind == "signing":
		id, err := awskms.CreateSigningKey(ctx, kr.kms, *label)
		if err != nil {
			return err
		}
		s, err := awskms.NewSigner(ctx, kr.kms, id)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "created %s key_id=%s address=%s\n", *kind, id, s.Address().Hex())
	case kr.env.provider == providerAWSKMS && *kind == "wrap":
		id, err := awskms.CreateWrapKey(ctx, kr.kms, *label)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "created %s key_id=%s\n", *kind, id)
	case *kind != "signing" && *kind != "wrap":
		return usageError("payd keys create: --kind is signing or wrap")
	default:
		return errors.New("payd keys: set PAY_KEYS_PROVIDER to pkcs11 or awskms")
	}
	return nil
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
