package pkcs11key

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/miekg/pkcs11"
)

// Errors. Test for them with errors.Is; the messages name the token and
// the key, never the PIN.
var (
	// ErrUnavailable: the module could not be loaded or the token is not
	// present (a network HSM unreachable, a device removed).
	ErrUnavailable = errors.New("pkcs11key: token unavailable")
	// ErrWrongPIN: the token refused the PIN (or the PIN is locked).
	ErrWrongPIN = errors.New("pkcs11key: the token refused the PIN")
	// ErrKeyNotFound: no key with that label in the token.
	ErrKeyNotFound = errors.New("pkcs11key: key not found")
	// ErrKeyExists: a key with that label is already in the token.
	ErrKeyExists = errors.New("pkcs11key: a key with that label already exists")
	// ErrNotSigningKey: the key may not sign (CKA_SIGN false), or is not a
	// secp256k1 key.
	ErrNotSigningKey = errors.New("pkcs11key: key may not sign")
	// ErrNotWrappingKey: the key may not encrypt and decrypt (an AES key
	// with CKA_ENCRYPT and CKA_DECRYPT is needed to seal secrets).
	ErrNotWrappingKey = errors.New("pkcs11key: key may not wrap data keys")
)

// Config says which token to use.
type Config struct {
	// Module is the path of the vendor's PKCS#11 library, e.g.
	// /usr/lib/softhsm/libsofthsm2.so. Required.
	Module string
	// Token is the token's label (CKA_LABEL of the token, as
	// `softhsm2-util --show-slots` or the vendor's tool shows it). Required.
	Token string
	// PIN is the user PIN (CKU_USER). Required. It is held in memory to
	// log in again after a session breaks, and never printed.
	PIN string
	// Logger receives session re-openings. Defaults to a logger that
	// discards.
	Logger *slog.Logger
}

func (c Config) validate() error {
	switch {
	case c.Module == "":
		return errors.New("pkcs11key: Config.Module (the PKCS#11 library's path) is required")
	case c.Token == "":
		return errors.New("pkcs11key: Config.Token (the token's label) is required")
	case c.PIN == "":
		return fmt.Errorf("pkcs11key: token %q: Config.PIN is required", c.Token)
	}
	return nil
}

// Token is a logged-in session with one token. It is safe for concurrent
// use: operations are serialised on its session (PKCS#11 sessions are not
// concurrent), and a broken session is reopened.
type Token struct {
	cfg Config
	log *slog.Logger
	mod *module

	mu      sync.Mutex
	session pkcs11.SessionHandle
	open    bool
	closed  bool
	// handles caches object handles by class and label for the current
	// session; a reconnection forgets them.
	handles map[handleKey]pkcs11.ObjectHandle
}

type handleKey struct {
	class uint
	label string
}

// handle returns the one object of class labelled label, cached for the
// session. Callers hold mu (inside do).
func (t *Token) handle(c *pkcs11.Ctx, s pkcs11.SessionHandle, class uint, label string) (pkcs11.ObjectHandle, error) {
	k := handleKey{class, label}
	if h, ok := t.handles[k]; ok {
		return h, nil
	}
	h, err := findOne(c, s, class, label)
	if err != nil {
		return 0, err
	}
	if t.handles == nil {
		t.handles = map[handleKey]pkcs11.ObjectHandle{}
	}
	t.handles[k] = h
	return h, nil
}

// Open loads the module, finds the token by label, opens a read-write
// session and logs in as the user. A wrong PIN is ErrWrongPIN; a module
// that does not load or a token that is not there is ErrUnavailable.
func Open(cfg Config) (*Token, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	mod, err := loadModule(cfg.Module)
	if err != nil {
		return nil, err
	}
	t := &Token{cfg: cfg, log: cfg.Logger, mod: mod}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.connect(); err != nil {
		mod.release()
		return nil, err
	}
	return t, nil
}

// Label is the token's label.
func (t *Token) Label() string { return t.cfg.Token }

// String names the token; the PIN is never printed.
func (t *Token) String() string { return "pkcs11 token " + t.cfg.Token }

// Close logs out, closes the session and releases the module.
func (t *Token) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	t.disconnect()
	t.mod.release()
	return nil
}

// connect finds the slot, opens a session and logs in. Callers hold mu.
func (t *Token) connect() error {
	slot, err := t.findSlot()
	if err != nil {
		return err
	}
	s, err := t.mod.ctx.OpenSession(slot, pkcs11.CKF_SERIAL_SESSION|pkcs11.CKF_RW_SESSION)
	if err != nil {
		return fmt.Errorf("%w: token %q: open session: %w", ErrUnavailable, t.cfg.Token, err)
	}
	if err := t.mod.ctx.Login(s, pkcs11.CKU_USER, t.cfg.PIN); err != nil && !is(err, pkcs11.CKR_USER_ALREADY_LOGGED_IN) {
		_ = t.mod.ctx.CloseSession(s)
		if is(err, pkcs11.CKR_PIN_INCORRECT, pkcs11.CKR_PIN_INVALID, pkcs11.CKR_PIN_LEN_RANGE, pkcs11.CKR_PIN_LOCKED, pkcs11.CKR_PIN_EXPIRED) {
			return fmt.Errorf("%w: token %q: login: %s", ErrWrongPIN, t.cfg.Token, rvName(err))
		}
		return fmt.Errorf("%w: token %q: login: %w", ErrUnavailable, t.cfg.Token, err)
	}
	t.session, t.open = s, true
	return nil
}

func (t *Token) disconnect() {
	if !t.open {
		return
	}
	_ = t.mod.ctx.Logout(t.session)
	_ = t.mod.ctx.CloseSession(t.session)
	t.open = false
	t.handles = nil
}

func (t *Token) findSlot() (uint, error) {
	slots, err := t.mod.ctx.GetSlotList(true)
	if err != nil {
		return 0, fmt.Errorf("%w: token %q: list slots: %w", ErrUnavailable, t.cfg.Token, err)
	}
	var labels []string
	for _, s := range slots {
		info, err := t.mod.ctx.GetTokenInfo(s)
		if err != nil {
			continue
		}
		label := strings.TrimRight(info.Label, " \x00")
		if label == t.cfg.Token {
			return s, nil
		}
		if label != "" {
			labels = append(labels, fmt.Sprintf("%q", label))
		}
	}
	return 0, fmt.Errorf("%w: no token labelled %q in %s (tokens present: %s)", ErrUnavailable, t.cfg.Token, t.cfg.Module,
		strings.Join(append(labels, "none")[:max(len(labels), 1)], ", "))
}

// do runs op on the session. When the session broke (closed, invalid,
// logged out, device error, token removed), it reconnects and runs op
// once more; a token that stays unreachable is ErrUnavailable.
func (t *Token) do(ctx context.Context, op func(c *pkcs11.Ctx, s pkcs11.SessionHandle) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return fmt.Errorf("%w: token %q is closed", ErrUnavailable, t.cfg.Token)
	}
	if !t.open {
		if err := t.connect(); err != nil {
			return err
		}
	}
	err := op(t.mod.ctx, t.session)
	if !broken(err) {
		return err
	}
	t.log.WarnContext(ctx, "pkcs11: session broke; reopening", slog.String("token", t.cfg.Token), slog.String("error", rvName(err)))
	t.disconnect()
	if err := t.connect(); err != nil {
		return err
	}
	if err = op(t.mod.ctx, t.session); broken(err) {
		t.disconnect()
		return fmt.Errorf("%w: token %q: %w", ErrUnavailable, t.cfg.Token, err)
	}
	return err
}

// Check reports whether the token answers: the session's state is read
// (reopened when broken).
func (t *Token) Check(ctx context.Context) error {
	return t.do(ctx, func(c *pkcs11.Ctx, s pkcs11.SessionHandle) error {
		_, err := c.GetSessionInfo(s)
		return err
	})
}

// broken reports errors after which the session must be reopened.
func broken(err error) bool {
	return is(err, pkcs11.CKR_SESSION_HANDLE_INVALID, pkcs11.CKR_SESSION_CLOSED, pkcs11.CKR_USER_NOT_LOGGED_IN,
		pkcs11.CKR_DEVICE_ERROR, pkcs11.CKR_DEVICE_REMOVED, pkcs11.CKR_TOKEN_NOT_PRESENT, pkcs11.CKR_TOKEN_NOT_RECOGNIZED,
		pkcs11.CKR_CRYPTOKI_NOT_INITIALIZED, pkcs11.CKR_OBJECT_HANDLE_INVALID, pkcs11.CKR_KEY_HANDLE_INVALID,
		pkcs11.CKR_SESSION_COUNT, pkcs11.CKR_GENERAL_ERROR)
}

// is reports whether err is one of the PKCS#11 return values.
func is(err error, rvs ...uint) bool {
	var e pkcs11.Error
	if !errors.As(err, &e) {
		return false
	}
	for _, rv := range rvs {
		if uint(e) == rv {
			return true
		}
	}
	return false
}

// rvName is the PKCS#11 return value's name (CKR_PIN_INCORRECT), for
// messages.
func rvName(err error) string {
	var e pkcs11.Error
	if errors.As(err, &e) {
		return strings.TrimPrefix(e.Error(), "pkcs11: ")
	}
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// module is a loaded PKCS#11 library, shared by the tokens of a process:
// C_Initialize and C_Finalize are per process, so the last Close
// finalises.
type module struct {
	path string
	ctx  *pkcs11.Ctx
	refs int
}

var (
	initMu    sync.Mutex
	modulesMu sync.Mutex
	modules   = map[string]*module{}
)

func loadModule(path string) (*module, error) {
	modulesMu.Lock()
	defer modulesMu.Unlock()
	if m := modules[path]; m != nil {
		m.refs++
		return m, nil
	}
	ctx := pkcs11.New(path)
	if ctx == nil {
		return nil, fmt.Errorf("%w: cannot load the PKCS#11 module %s (is the path right and the library installed?)", ErrUnavailable, path)
	}
	if err := ctx.Initialize(); err != nil && !is(err, pkcs11.CKR_CRYPTOKI_ALREADY_INITIALIZED) {
		ctx.Destroy()
		return nil, fmt.Errorf("%w: initialise the PKCS#11 module %s: %w", ErrUnavailable, path, err)
	}
	m := &module{path: path, ctx: ctx, refs: 1}
	modules[path] = m
	return m, nil
}

func (m *module) release() {
	modulesMu.Lock()
	defer modulesMu.Unlock()
	m.refs--
	if m.refs > 0 {
		return
	}
	delete(modules, m.path)
	_ = m.ctx.Finalize()
	m.ctx.Destroy()
}

// InitToken initialises the token of a free slot (one whose token is not
// initialised yet) with label, the security officer's PIN soPIN and the
// user PIN cfg.PIN. It is for SoftHSM2 in tests and development, which
// always offers such a slot; production tokens are set up with the
// vendor's tools.
func InitToken(cfg Config, soPIN string) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	initMu.Lock() // one free slot at a time: concurrent callers would pick the same
	defer initMu.Unlock()
	mod, err := loadModule(cfg.Module)
	if err != nil {
		return err
	}
	defer mod.release()
	c := mod.ctx
	slots, err := c.GetSlotList(true)
	if err != nil {
		return fmt.Errorf("%w: list slots: %w", ErrUnavailable, err)
	}
	for _, slot := range slots {
		info, err := c.GetTokenInfo(slot)
		if err != nil || info.Flags&pkcs11.CKF_TOKEN_INITIALIZED != 0 {
			continue
		}
		if err := c.InitToken(slot, soPIN, cfg.Token); err != nil {
			return fmt.Errorf("pkcs11key: initialise token %q: %s", cfg.Token, rvName(err))
		}
		s, err := c.OpenSession(slot, pkcs11.CKF_SERIAL_SESSION|pkcs11.CKF_RW_SESSION)
		if err != nil {
			return fmt.Errorf("pkcs11key: token %q: %s", cfg.Token, rvName(err))
		}
		defer func() { _ = c.CloseSession(s) }()
		if err := c.Login(s, pkcs11.CKU_SO, soPIN); err != nil {
			return fmt.Errorf("pkcs11key: token %q: security officer login: %s", cfg.Token, rvName(err))
		}
		defer func() { _ = c.Logout(s) }()
		if err := c.InitPIN(s, cfg.PIN); err != nil {
			return fmt.Errorf("pkcs11key: token %q: set the user PIN: %s", cfg.Token, rvName(err))
		}
		return nil
	}
	return fmt.Errorf("pkcs11key: %s offers no free slot to initialise token %q", cfg.Module, cfg.Token)
}
