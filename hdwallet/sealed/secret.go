package sealed

import (
	"fmt"
	"io"
	"log/slog"
)

// Secret is an opened secret's plaintext, outside the Go heap and locked
// in memory where the OS allows (see Locked). It prints as "[REDACTED]".
type Secret struct {
	buf    []byte
	mem    []byte // the mapping that holds buf; nil when buf is on the heap
	locked bool
}

// Bytes is the plaintext, valid until Destroy. Do not keep it.
func (s *Secret) Bytes() []byte { return s.buf }

// Locked reports whether the plaintext is locked in memory (never
// swapped out). It is false where the OS refused (RLIMIT_MEMLOCK, no
// CAP_IPC_LOCK) or offers no locking.
func (s *Secret) Locked() bool { return s.locked }

// Destroy zeroes the plaintext and releases its memory.
func (s *Secret) Destroy() {
	if s == nil || s.buf == nil {
		return
	}
	clear(s.buf)
	release(s)
	s.buf = nil
}

// String returns "[REDACTED]".
func (s *Secret) String() string { return "[REDACTED]" }

// GoString returns "sealed.Secret{[REDACTED]}".
func (s *Secret) GoString() string { return "sealed.Secret{[REDACTED]}" }

// Format prints "[REDACTED]" under every verb.
func (s *Secret) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, "[REDACTED]") }

// LogValue keeps the secret out of log/slog.
func (s *Secret) LogValue() slog.Value { return slog.StringValue("[REDACTED]") }
