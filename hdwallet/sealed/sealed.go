package sealed

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Version is the sealed-file format this package writes.
const Version = 1

// KeyWrapper wraps and unwraps data keys with a key held elsewhere (an HSM
// or a KMS). pkcs11key.Wrapper and awskms.Wrapper satisfy it.
type KeyWrapper interface {
	// Provider names the kind of key store: "pkcs11", "awskms".
	Provider() string
	// KeyID names the key within it.
	KeyID() string
	WrapKey(ctx context.Context, dataKey, aad []byte) ([]byte, error)
	UnwrapKey(ctx context.Context, wrapped, aad []byte) ([]byte, error)
}

// ErrNotSealed: the file is not a sealed file (a plaintext secret, or
// something else).
var ErrNotSealed = errors.New("sealed: not a sealed file")

// Header is what a sealed file says about itself, readable without the
// key.
type Header struct {
	Version  int    `json:"evmpay_sealed"`
	Name     string `json:"name"`
	Provider string `json:"provider"`
	KeyID    string `json:"key_id"`
}

type file struct {
	Header
	WrappedKey []byte `json:"wrapped_key"`
	Nonce      []byte `json:"nonce"`
	Ciphertext []byte `json:"ciphertext"`
}

// aad binds the header to the wrapped key and the ciphertext.
func (h Header) aad() []byte {
	return []byte(fmt.Sprintf("evmpay-sealed/v%d\n%s\n%s\n%s", h.Version, h.Name, h.Provider, h.KeyID))
}

// IsSealed reports whether b looks like a sealed file (its header parses).
func IsSealed(b []byte) bool {
	_, err := ParseHeader(b)
	return err == nil
}

// ParseHeader reads a sealed file's header. It fails with ErrNotSealed
// for anything else, without quoting it (it may be a plaintext secret).
func ParseHeader(b []byte) (Header, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return Header{}, ErrNotSealed
	}
	var h Header
	if err := json.Unmarshal(b, &h); err != nil || h.Version == 0 {
		return Header{}, ErrNotSealed
	}
	if h.Version != Version {
		return Header{}, fmt.Errorf("sealed: format version %d is not supported (this build reads version %d)", h.Version, Version)
	}
	if h.Name == "" || h.Provider == "" || h.KeyID == "" {
		return Header{}, errors.New("sealed: the header lacks name, provider or key_id")
	}
	return h, nil
}

// Seal encrypts plaintext, the secret called name, under a fresh data key
// wrapped by w, and returns the sealed file.
func Seal(ctx context.Context, w KeyWrapper, name string, plaintext []byte) ([]byte, error) {
	if name == "" || strings.ContainsAny(name, "\n") {
		return nil, errors.New("sealed: a one-line name is required")
	}
	if len(plaintext) == 0 {
		return nil, fmt.Errorf("sealed: %s is empty", name)
	}
	f := file{Header: Header{Version: Version, Name: name, Provider: w.Provider(), KeyID: w.KeyID()}}
	dataKey := make([]byte, 32)
	defer clear(dataKey)
	if _, err := rand.Read(dataKey); err != nil {
		return nil, err
	}
	aad := f.aad()
	var err error
	if f.WrappedKey, err = w.WrapKey(ctx, dataKey, aad); err != nil {
		return nil, fmt.Errorf("sealed: %s: wrap the data key: %w", name, err)
	}
	gcm, err := newGCM(dataKey)
	if err != nil {
		return nil, err
	}
	f.Nonce = make([]byte, gcm.NonceSize())
	if _, err := rand.Read(f.Nonce); err != nil {
		return nil, err
	}
	f.Ciphertext = gcm.Seal(nil, f.Nonce, plaintext, aad)
	out, err := json.Marshal(f)
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// Open decrypts the sealed file b, which must hold the secret called name
// and be wrapped by w's key. The plaintext is returned in a Secret; call
// Destroy when done.
func Open(ctx context.Context, w KeyWrapper, name string, b []byte) (*Secret, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return nil, err
	}
	if h.Name != name {
		return nil, fmt.Errorf("sealed: the file holds %s, not %s", h.Name, name)
	}
	if h.Provider != w.Provider() || h.KeyID != w.KeyID() {
		return nil, fmt.Errorf("sealed: %s is wrapped by %s key %s, not by %s key %s", name, h.Provider, h.KeyID, w.Provider(), w.KeyID())
	}
	var f file
	if err := json.Unmarshal(bytes.TrimSpace(b), &f); err != nil {
		return nil, fmt.Errorf("sealed: %s: the file is damaged", name)
	}
	aad := h.aad()
	dataKey, err := w.UnwrapKey(ctx, f.WrappedKey, aad)
	if err != nil {
		return nil, fmt.Errorf("sealed: %s: unwrap the data key: %w", name, err)
	}
	defer clear(dataKey)
	gcm, err := newGCM(dataKey)
	if err != nil {
		return nil, fmt.Errorf("sealed: %s: %w", name, err)
	}
	if len(f.Nonce) != gcm.NonceSize() || len(f.Ciphertext) < gcm.Overhead() {
		return nil, fmt.Errorf("sealed: %s: the file is damaged", name)
	}
	s := newSecret(len(f.Ciphertext) - gcm.Overhead())
	if _, err := gcm.Open(s.buf[:0], f.Nonce, f.Ciphertext, aad); err != nil {
		s.Destroy()
		return nil, fmt.Errorf("sealed: %s: the ciphertext does not authenticate (altered, or sealed under another data key)", name)
	}
	return s, nil
}

func newGCM(key []byte) (cipher.AEAD, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("sealed: the data key is %d bytes, want 32", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}
