package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/evmpay/evmpay/hdwallet"
	"github.com/evmpay/evmpay/hdwallet/awskms"
	"github.com/evmpay/evmpay/hdwallet/pkcs11key"
	"github.com/evmpay/evmpay/hdwallet/sealed"
	"github.com/evmpay/evmpay/sweep"
)

// Key providers: where the signing keys live and what wraps sealed
// secrets (docs/keys.md).
const (
	providerFile   = "file"   // plaintext files (development; warned about in serve)
	providerPKCS11 = "pkcs11" // an HSM over PKCS#11
	providerAWSKMS = "awskms" // AWS KMS
)

// Names of the account keys in reports (beside the secrets' names).
const (
	keySweepWallet = "SWEEP_WALLET_KEY"
	keyGasFunder   = "GAS_FUNDER_KEY"
)

// plaintextWarning is what serve says of a secret read from a plaintext
// file: the service's contract.
const plaintextWarning = "must live in an HSM or KMS in any deployed environment: seal it (`payd secrets seal`) or move the key into the HSM or KMS (docs/keys.md)"

// keysEnv is the key provider's configuration.
type keysEnv struct {
	provider string
	// PKCS#11: the vendor's library, the token's label and a file holding
	// the user PIN.
	pkcs11Module, pkcs11Token, pkcs11PINFile string
	// sweepKey and funderKey are the labels (pkcs11) or key ids (awskms)
	// of the account keys; "" keeps the sweep wallet derived from the
	// mnemonic and the gas funder in GAS_FUNDER_PRIVATE_KEY_FILE.
	sweepKey, funderKey string
	// sealKey wraps the secrets `payd secrets seal` seals.
	sealKey string
	// Retired keys, drained to the ones that took over: labels or key ids,
	// "mnemonic" (the derived sweep wallet) and "file"
	// (GAS_FUNDER_PRIVATE_KEY_FILE).
	sweepRetired, funderRetired []string
	// payoutKeys are the merchants whose payout wallet key is in the
	// provider (PAYOUT_WALLET_KEYS, refunds.go).
	payoutKeys string
}

func readKeysEnv(getenv func(string) string) (keysEnv, error) {
	e := keysEnv{
		provider:      strings.ToLower(strings.TrimSpace(getenv("PAY_KEYS_PROVIDER"))),
		pkcs11Module:  getenv("PAY_PKCS11_MODULE"),
		pkcs11Token:   getenv("PAY_PKCS11_TOKEN"),
		pkcs11PINFile: getenv("PAY_PKCS11_PIN_FILE"),
		sweepKey:      strings.TrimSpace(getenv(keySweepWallet)),
		funderKey:     strings.TrimSpace(getenv(keyGasFunder)),
		sealKey:       strings.TrimSpace(getenv("PAY_SEAL_KEY")),
		sweepRetired:  splitList(getenv(keySweepWallet + "_RETIRED")),
		funderRetired: splitList(getenv(keyGasFunder + "_RETIRED")),
		payoutKeys:    strings.TrimSpace(getenv(payoutKeysEnv)),
	}
	if e.provider == "" {
		e.provider = providerFile
	}
	if getenv("PAY_PKCS11_PIN") != "" {
		return e, errors.New("PAY_PKCS11_PIN is set in the environment: put the PIN in a file readable only by payd and set PAY_PKCS11_PIN_FILE")
	}
	switch e.provider {
	case providerFile:
		if e.sweepKey != "" || e.funderKey != "" || e.sealKey != "" || e.payoutKeys != "" {
			return e, fmt.Errorf("%s, %s and PAY_SEAL_KEY name keys in an HSM or KMS: set PAY_KEYS_PROVIDER=pkcs11 or awskms", keySweepWallet, keyGasFunder)
		}
	case providerPKCS11:
		var missing []string
		for name, v := range map[string]string{"PAY_PKCS11_MODULE": e.pkcs11Module, "PAY_PKCS11_TOKEN": e.pkcs11Token, "PAY_PKCS11_PIN_FILE": e.pkcs11PINFile} {
			if v == "" {
				missing = append(missing, name)
			}
		}
		if len(missing) > 0 {
			sort.Strings(missing)
			return e, fmt.Errorf("PAY_KEYS_PROVIDER=pkcs11 needs %s (the PKCS#11 library, the token's label, a file holding the user PIN)", strings.Join(missing, ", "))
		}
	case providerAWSKMS:
	default:
		return e, fmt.Errorf("PAY_KEYS_PROVIDER=%q: want file, pkcs11 or awskms", e.provider)
	}
	return e, nil
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// accountKey is a signing key held by an HSM or KMS: a sweep.AccountSigner
// that can be probed.
type accountKey interface {
	Address() common.Address
	SignTx(ctx context.Context, tx *types.Transaction, signer types.Signer) (*types.Transaction, error)
	Check(ctx context.Context) error
}

// secretSource says where one secret or key came from, for the start-up
// log and /v1/admin/status. It never holds a value.
type secretSource struct {
	Name     string `json:"name"`
	Provider string `json:"provider"`
	// Sealed: a sealed file, opened with the provider's key.
	Sealed bool   `json:"sealed,omitempty"`
	KeyID  string `json:"key_id,omitempty"`
	// Address of an account key.
	Address string `json:"address,omitempty"`
	// File is where a plaintext or sealed secret was read.
	File string `json:"file,omitempty"`
	// Warning names the contract for a plaintext secret.
	Warning string `json:"warning,omitempty"`
}

// keyring is serve's KeyProvider: secrets from <NAME>_FILE, plaintext or
// sealed (opened with the provider's wrapping key), and the account keys
// in the provider. It records where each came from.
type keyring struct {
	env   keysEnv
	files fileProvider
	log   *slog.Logger

	tok *pkcs11key.Token
	kms *kms.Client

	mu      sync.Mutex
	sources map[string]secretSource
	keys    map[string]accountKey // by report name, for the health probe
	problem map[string]string     // by report name: the last probe's error
}

// newKeyring connects to the provider: a module that does not load, a
// token that is not there, a wrong PIN or a KMS configuration that cannot
// be loaded is an error here, before anything starts.
func newKeyring(ctx context.Context, getenv func(string) string, log *slog.Logger) (*keyring, error) {
	env, err := readKeysEnv(getenv)
	if err != nil {
		return nil, err
	}
	k := &keyring{env: env, files: fileProvider{getenv: getenv}, log: log,
		sources: map[string]secretSource{}, keys: map[string]accountKey{}, problem: map[string]string{}}
	switch env.provider {
	case providerPKCS11:
		pin, err := readSecretFile("PAY_PKCS11_PIN_FILE", env.pkcs11PINFile)
		if err != nil {
			return nil, err
		}
		k.tok, err = pkcs11key.Open(pkcs11key.Config{Module: env.pkcs11Module, Token: env.pkcs11Token,
			PIN: strings.TrimSpace(string(pin)), Logger: log.With("component", "pkcs11")})
		clear(pin)
		if err != nil {
			return nil, fmt.Errorf("PAY_KEYS_PROVIDER=pkcs11: %w", err)
		}
	case providerAWSKMS:
		cfg, err := awsconfig.LoadDefaultConfig(ctx)
		if err != nil {
			return nil, fmt.Errorf("PAY_KEYS_PROVIDER=awskms: AWS configuration: %w", err)
		}
		k.kms = kms.NewFromConfig(cfg)
	}
	return k, nil
}

// Close releases the HSM session.
func (k *keyring) Close() {
	if k.tok != nil {
		_ = k.tok.Close()
	}
}

// Secret reads <NAME>_FILE; a sealed file is opened with the provider's
// key (its header names it), a plaintext one is logged with the
// contract's warning, once per secret.
func (k *keyring) Secret(ctx context.Context, name string) ([]byte, error) {
	b, err := k.files.Secret(ctx, name)
	if err != nil {
		return nil, err
	}
	src := secretSource{Name: name, Provider: providerFile, File: k.files.getenv(name + "_FILE")}
	if h, err := sealed.ParseHeader(b); err == nil {
		w, err := k.wrapper(ctx, h.Provider, h.KeyID)
		if err != nil {
			return nil, fmt.Errorf("%s_FILE is sealed by %s key %s: %w", name, h.Provider, h.KeyID, err)
		}
		s, err := sealed.Open(ctx, w, name, b)
		if err != nil {
			return nil, fmt.Errorf("%s_FILE: %w", name, err)
		}
		defer s.Destroy()
		b = append([]byte(nil), s.Bytes()...)
		src.Provider, src.Sealed, src.KeyID = h.Provider, true, h.KeyID
	} else if !errors.Is(err, sealed.ErrNotSealed) {
		return nil, fmt.Errorf("%s_FILE: %w", name, err)
	} else {
		src.Warning = name + " " + plaintextWarning
	}
	k.record(ctx, src)
	return b, nil
}

// record keeps a source and logs it the first time.
func (k *keyring) record(ctx context.Context, src secretSource) {
	k.mu.Lock()
	_, seen := k.sources[src.Name]
	k.sources[src.Name] = src
	k.mu.Unlock()
	if seen {
		return
	}
	attrs := []any{slog.String("name", src.Name), slog.String("provider", src.Provider)}
	if src.Sealed {
		attrs = append(attrs, slog.Bool("sealed", true))
	}
	if src.KeyID != "" {
		attrs = append(attrs, slog.String("key_id", src.KeyID))
	}
	if src.Address != "" {
		attrs = append(attrs, slog.String("address", src.Address))
	}
	if src.Warning != "" {
		k.log.WarnContext(ctx, "plaintext secret file: "+src.Warning, append(attrs, slog.String("file", src.File))...)
		return
	}
	k.log.InfoContext(ctx, "secret", attrs...)
}

// sources lists where every secret and key read so far came from.
func (k *keyring) report() []secretSource {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]secretSource, 0, len(k.sources))
	for _, s := range k.sources {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// wrapper is the provider's key that wraps a sealed secret's data key.
func (k *keyring) wrapper(ctx context.Context, provider, keyID string) (sealed.KeyWrapper, error) {
	if provider != k.env.provider {
		return nil, fmt.Errorf("PAY_KEYS_PROVIDER is %s: configure %s to open it", k.env.provider, provider)
	}
	switch provider {
	case providerPKCS11:
		token, label, ok := strings.Cut(keyID, "/")
		if !ok || token != k.env.pkcs11Token {
			return nil, fmt.Errorf("the key is in token %q, PAY_PKCS11_TOKEN is %q", token, k.env.pkcs11Token)
		}
		return k.tok.Wrapper(ctx, label)
	case providerAWSKMS:
		return awskms.NewWrapper(k.kms, keyID), nil
	}
	return nil, fmt.Errorf("unknown provider %q", provider)
}

// accountKey is the signing key id (label or KMS key id) in the provider.
func (k *keyring) accountKey(ctx context.Context, name, id string) (accountKey, error) {
	var (
		key   accountKey
		keyID string
		err   error
	)
	switch k.env.provider {
	case providerPKCS11:
		var s *pkcs11key.Signer
		if s, err = k.tok.Signer(ctx, id); err == nil {
			key, keyID = s, s.KeyID()
		}
	case providerAWSKMS:
		var s *awskms.Signer
		if s, err = awskms.NewSigner(ctx, k.kms, id); err == nil {
			key, keyID = s, s.KeyID()
		}
	default:
		err = fmt.Errorf("PAY_KEYS_PROVIDER=%s holds no signing keys", k.env.provider)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	k.mu.Lock()
	k.keys[name] = key
	k.mu.Unlock()
	k.record(ctx, secretSource{Name: name, Provider: k.env.provider, KeyID: keyID, Address: key.Address().Hex()})
	return key, nil
}

// sweepKeys assembles the sweeper's keys: the deposit wallet (the
// mnemonic), the sweep wallet (SWEEP_WALLET_KEY in the provider, or
// derived from the mnemonic), the gas funder (GAS_FUNDER_KEY in the
// provider, or GAS_FUNDER_PRIVATE_KEY_FILE) and the retired keys to drain.
func (k *keyring) sweepKeys(ctx context.Context, w *hdwallet.Wallet) (sweep.Keys, error) {
	keys := sweep.Keys{Deposits: w}
	derived := func() (sweep.AccountSigner, error) {
		sk, err := w.SweepKey()
		if err != nil {
			return nil, err
		}
		return sweep.NewKeySigner(sk), nil
	}
	if k.env.sweepKey != "" {
		key, err := k.accountKey(ctx, keySweepWallet, k.env.sweepKey)
		if err != nil {
			return keys, err
		}
		keys.Wallet = key
	} else {
		d, err := derived()
		if err != nil {
			return keys, err
		}
		keys.Wallet = d
		k.record(ctx, secretSource{Name: keySweepWallet, Provider: "mnemonic", KeyID: hdwallet.SweepPath, Address: d.Address().Hex()})
	}
	fileFunder := func() (sweep.AccountSigner, error) {
		f, err := loadGasFunder(ctx, k)
		if err != nil {
			return nil, err
		}
		return sweep.NewKeySigner(f), nil
	}
	switch {
	case k.env.funderKey != "":
		if k.files.getenv(secretGasFunder+"_FILE") != "" && !slices.Contains(k.env.funderRetired, providerFile) {
			return keys, fmt.Errorf("both %s and %s_FILE are set: the funder is one key (set %s_RETIRED=file to drain the file's key into the new one)", keyGasFunder, secretGasFunder, keyGasFunder)
		}
		key, err := k.accountKey(ctx, keyGasFunder, k.env.funderKey)
		if err != nil {
			return keys, err
		}
		keys.Funder = key
	default:
		f, err := fileFunder()
		switch {
		case err == nil:
			keys.Funder = f
		case errors.Is(err, errSecretMissing):
			k.log.Warn("no gas funder configured: the sweep wallet will not be topped up", "hint", "set GAS_FUNDER_KEY or GAS_FUNDER_PRIVATE_KEY_FILE")
		default:
			return keys, err
		}
	}
	for _, id := range k.env.sweepRetired {
		var (
			r   sweep.AccountSigner
			err error
		)
		if id == "mnemonic" {
			r, err = derived()
		} else {
			r, err = k.accountKey(ctx, keySweepWallet+"_RETIRED "+id, id)
		}
		if err != nil {
			return keys, fmt.Errorf("%s_RETIRED: %w", keySweepWallet, err)
		}
		keys.Retired = append(keys.Retired, sweep.Retired{Key: r, To: keys.Wallet.Address()})
	}
	for _, id := range k.env.funderRetired {
		if keys.Funder == nil {
			return keys, fmt.Errorf("%s_RETIRED is set but no gas funder takes over", keyGasFunder)
		}
		var (
			r   sweep.AccountSigner
			err error
		)
		if id == providerFile {
			r, err = fileFunder()
		} else {
			r, err = k.accountKey(ctx, keyGasFunder+"_RETIRED "+id, id)
		}
		if err != nil {
			return keys, fmt.Errorf("%s_RETIRED: %w", keyGasFunder, err)
		}
		keys.Retired = append(keys.Retired, sweep.Retired{Key: r, To: keys.Funder.Address()})
	}
	return keys, nil
}

// addresses are the account keys' addresses read so far (service
// addresses: never a merchant's settlement address).
func (k *keyring) addresses(ctx context.Context) []common.Address {
	var out []common.Address
	for _, pair := range [][2]string{{keySweepWallet, k.env.sweepKey}, {keyGasFunder, k.env.funderKey}} {
		if pair[1] == "" {
			continue
		}
		if key, err := k.accountKey(ctx, pair[0], pair[1]); err == nil {
			out = append(out, key.Address())
		}
	}
	return out
}

// runHealth probes every account key every interval, so that /readyz of
// the sweep role says when the HSM or KMS cannot be reached, and logs
// each change.
func (k *keyring) runHealth(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		k.probe(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (k *keyring) probe(ctx context.Context) {
	k.mu.Lock()
	keys := make(map[string]accountKey, len(k.keys))
	for n, key := range k.keys {
		keys[n] = key
	}
	k.mu.Unlock()
	for name, key := range keys {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := key.Check(cctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		k.mu.Lock()
		was := k.problem[name]
		if err != nil {
			k.problem[name] = err.Error()
		} else {
			delete(k.problem, name)
		}
		k.mu.Unlock()
		switch {
		case err != nil && was == "":
			k.log.ErrorContext(ctx, "key unreachable: sweeps and top-ups wait until it is back", "key", name, "err", err)
		case err == nil && was != "":
			k.log.InfoContext(ctx, "key reachable again", "key", name)
		}
	}
}

// problems are the account keys the last probe could not reach, as
// "NAME: error".
func (k *keyring) problems() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for n, p := range k.problem {
		out = append(out, n+": "+p)
	}
	sort.Strings(out)
	return out
}

// sweepKeys is buildSweep's keys: from the keyring in serve; in dev (no
// keyring) the sweep wallet derived from the mnemonic and the funder from
// the development secrets.
func sweepKeys(ctx context.Context, kp KeyProvider, w *hdwallet.Wallet, log *slog.Logger) (sweep.Keys, error) {
	if kr, ok := kp.(*keyring); ok {
		return kr.sweepKeys(ctx, w)
	}
	sweepKey, err := w.SweepKey()
	if err != nil {
		return sweep.Keys{}, err
	}
	keys := sweep.Keys{Deposits: w, Wallet: sweep.NewKeySigner(sweepKey)}
	funder, err := loadGasFunder(ctx, kp)
	switch {
	case err == nil:
		keys.Funder = sweep.NewKeySigner(funder)
	case errors.Is(err, errSecretMissing):
		log.Warn("no gas funder configured: the sweep wallet will not be topped up", "hint", "set GAS_FUNDER_PRIVATE_KEY_FILE")
	default:
		return keys, err
	}
	return keys, nil
}

// accountKeyAddresses are the addresses of the account keys the provider
// holds (none outside serve's keyring).
func accountKeyAddresses(ctx context.Context, kp KeyProvider) []common.Address {
	if kr, ok := kp.(*keyring); ok {
		return kr.addresses(ctx)
	}
	return nil
}

// keyProblems are the sweep role's unreachable keys ("NAME: error"); nil
// when this process holds no HSM or KMS key.
func (a *app) keyProblems() []string {
	kr, ok := a.cfg.keys.(*keyring)
	if !ok {
		return nil
	}
	kr.mu.Lock()
	n := len(kr.keys)
	kr.mu.Unlock()
	if n == 0 {
		return nil
	}
	return append([]string{}, kr.problems()...)
}

// keysStatus adds the secrets' sources, the retired keys and unreachable
// keys to the operator status.
func (a *app) keysStatus(ctx context.Context, rep *statusReport) {
	if kr, ok := a.cfg.keys.(*keyring); ok {
		rep.Secrets = kr.report()
		for _, p := range kr.problems() {
			rep.Errors = append(rep.Errors, "key unreachable: "+p)
		}
	}
	if a.sweeper == nil {
		return
	}
	retired, err := a.sweeper.RetiredStatus(ctx)
	if err != nil {
		rep.Errors = append(rep.Errors, "retired keys: chain unavailable")
		return
	}
	rep.RetiredKeys = retired
}
