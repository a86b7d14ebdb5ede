package invoice

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
)

// MaxJSONDepth caps the nesting of objects and arrays in a request body, the
// body's own object counting as one (so metadata may nest 31 levels). Deep
// nesting crashes or stalls common JSON parsers of the merchants and
// webhook receivers the values are echoed to.
const MaxJSONDepth = 32

// problem.CodeUnsafeJSON is the problem code of a value that is valid JSON but that
// common receivers' parsers reject or crash on.

// unsafeJSON explains why a JSON value was refused.
type unsafeJSON struct{ reason string }

func (e *unsafeJSON) Error() string { return e.reason }

// checkInteroperable refuses, in a syntactically valid JSON value that
// starts at nesting depth depth, what breaks receivers even though RFC 8259
// allows it: the NUL character (\u0000), unpaired UTF-16 surrogates
// (\ud800), numbers beyond float64's range (1e999999, which parsers turn
// into Infinity or an error) and nesting deeper than MaxJSONDepth (RFC 8259
// §9, §8.2 and §6 leave these to implementations; I-JSON, RFC 7493, forbids
// the first three).
func checkInteroperable(v []byte, depth int) error {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '{' || c == '[':
			depth++
			if depth > MaxJSONDepth {
				return &unsafeJSON{"objects and arrays nest deeper than " + strconv.Itoa(MaxJSONDepth) + " levels"}
			}
		case c == '}' || c == ']':
			depth--
		case c == '"':
			end, err := checkString(v, i+1)
			if err != nil {
				return err
			}
			i = end
		case c == '-' || ('0' <= c && c <= '9'):
			j := i + 1
			for j < len(v) && (('0' <= v[j] && v[j] <= '9') || v[j] == '.' || v[j] == 'e' || v[j] == 'E' || v[j] == '+' || v[j] == '-') {
				j++
			}
			f, err := strconv.ParseFloat(string(v[i:j]), 64)
			if err != nil && !errors.Is(err, strconv.ErrRange) {
				return &unsafeJSON{"a number is not valid"}
			}
			if math.IsInf(f, 0) {
				return &unsafeJSON{"a number is too large for a 64-bit float (" + truncate(string(v[i:j]), 20) + ")"}
			}
			i = j - 1
		}
	}
	return nil
}

// checkString scans the string whose contents start at v[i] and returns the
// index of its closing quote. The value is valid JSON, so escapes are well
// formed; a raw NUL cannot occur (control characters must be escaped).
func checkString(v []byte, i int) (int, error) {
	pendingHigh := false // the previous escape was a high surrogate
	for ; i < len(v); i++ {
		c := v[i]
		if c == '"' {
			if pendingHigh {
				return 0, errLoneSurrogate
			}
			return i, nil
		}
		if c != '\\' {
			if pendingHigh {
				return 0, errLoneSurrogate
			}
			continue
		}
		i++
		if v[i] != 'u' {
			if pendingHigh {
				return 0, errLoneSurrogate
			}
			continue
		}
		r, err := strconv.ParseUint(string(v[i+1:i+5]), 16, 16)
		if err != nil {
			return 0, &unsafeJSON{"a \\u escape is not valid"}
		}
		i += 4
		switch {
		case r == 0:
			return 0, &unsafeJSON{"a string contains the NUL character (\\u0000)"}
		case 0xd800 <= r && r <= 0xdbff:
			if pendingHigh {
				return 0, errLoneSurrogate
			}
			pendingHigh = true
		case 0xdc00 <= r && r <= 0xdfff:
			if !pendingHigh {
				return 0, errLoneSurrogate
			}
			pendingHigh = false
		default:
			if pendingHigh {
				return 0, errLoneSurrogate
			}
		}
	}
	return 0, &unsafeJSON{"a string is not terminated"}
}

var errLoneSurrogate = &unsafeJSON{"a string contains an unpaired UTF-16 surrogate escape (e.g. \\ud800): it is not Unicode text"}

// duplicateMember returns the path ("metadata.a.b") of the first member
// that appears twice in one object anywhere inside the valid JSON value v,
// named from prefix; "" when there is none. RFC 8259 leaves duplicate
// names to implementations: Go's decoder keeps the last, others the first
// or refuse, so a body with one is refused at every depth, as the
// top-level members are.
func duplicateMember(v []byte, prefix string) string {
	type frame struct {
		object  bool
		keys    map[string]bool
		wantKey bool
		path    string
	}
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	var stack []*frame
	path := prefix // the path of the next value
	for {
		tok, err := dec.Token()
		if err != nil {
			return "" // the end (v is valid JSON)
		}
		if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].wantKey {
			if name, ok := tok.(string); ok {
				top := stack[n-1]
				if top.keys[name] {
					return top.path + "." + name
				}
				top.keys[name], top.wantKey = true, false
				path = top.path + "." + name
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, keys: map[string]bool{}, wantKey: true, path: path})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{path: path + "[]"})
			path += "[]"
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		// A value ended: an enclosing object wants its next key, an array
		// its next element.
		if n := len(stack); n > 0 {
			if t := stack[n-1]; t.object {
				t.wantKey = true
			} else {
				path = t.path
			}
		}
	}
}
