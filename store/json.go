package store

import (
	"database/sql/driver"
	"fmt"
)

// RawJSON is JSON text stored in a TEXT column. Its JSON encoding is the
// text itself.
type RawJSON []byte

// Value implements driver.Valuer: the text, or NULL when empty.
func (j RawJSON) Value() (driver.Value, error) {
	if len(j) == 0 {
		return nil, nil
	}
	return string(j), nil
}

// Scan implements sql.Scanner.
func (j *RawJSON) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*j = nil
	case string:
		*j = RawJSON(v)
	case []byte:
		*j = append(RawJSON(nil), v...)
	default:
		return fmt.Errorf("scan json: unsupported type %T", src)
	}
	return nil
}

// MarshalJSON returns the text (null when empty).
func (j RawJSON) MarshalJSON() ([]byte, error) {
	if len(j) == 0 {
		return []byte("null"), nil
	}
	return j, nil
}

// UnmarshalJSON stores a copy of the text.
func (j *RawJSON) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*j = nil
		return nil
	}
	*j = append((*j)[:0], b...)
	return nil
}
