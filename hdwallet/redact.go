package hdwallet

import (
	"fmt"
	"io"
	"log/slog"
)

// redacted is what secret-holding values print as.
const redacted = "[REDACTED]"

// writeRedacted implements fmt.Formatter for secret-holding types: every
// verb, flag and width prints the same fixed text, so %v, %+v, %#v, %s, %x,
// %d and friends can never reach a field.
func writeRedacted(f fmt.State, typeName string) {
	if f.Flag('#') {
		_, _ = io.WriteString(f, typeName+"{"+redacted+"}")
		return
	}
	_, _ = io.WriteString(f, redacted)
}

// Compile-time checks: every secret-holding type redacts under fmt and slog.
var (
	_ fmt.Formatter  = (*Mnemonic)(nil)
	_ fmt.Stringer   = (*Mnemonic)(nil)
	_ fmt.GoStringer = (*Mnemonic)(nil)
	_ slog.LogValuer = (*Mnemonic)(nil)
	_ fmt.Formatter  = (*Wallet)(nil)
	_ fmt.Stringer   = (*Wallet)(nil)
	_ fmt.GoStringer = (*Wallet)(nil)
	_ slog.LogValuer = (*Wallet)(nil)
	_ fmt.Formatter  = (*ExtendedKey)(nil)
	_ fmt.Stringer   = (*ExtendedKey)(nil)
	_ fmt.GoStringer = (*ExtendedKey)(nil)
	_ slog.LogValuer = (*ExtendedKey)(nil)
)
