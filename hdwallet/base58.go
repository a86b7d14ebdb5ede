package hdwallet

import (
	"bytes"
	"crypto/sha256"
	"errors"
)

// The Bitcoin Base58 alphabet: no 0, O, I or l.
const base58Alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

var base58Index = func() [256]int8 {
	var idx [256]int8
	for i := range idx {
		idx[i] = -1
	}
	for i := 0; i < len(base58Alphabet); i++ {
		idx[base58Alphabet[i]] = int8(i)
	}
	return idx
}()

var (
	errBase58Char     = errors.New("invalid base58 character")
	errBase58Checksum = errors.New("base58check checksum mismatch")
	errBase58Short    = errors.New("base58check payload too short")
)

// base58Encode encodes b in Base58 (Bitcoin alphabet). Leading zero bytes
// become leading '1's.
func base58Encode(b []byte) string {
	zeros := 0
	for zeros < len(b) && b[zeros] == 0 {
		zeros++
	}
	// log(256)/log(58) ≈ 1.366; digits are little-endian base-58.
	digits := make([]byte, 0, (len(b)-zeros)*138/100+1)
	for _, c := range b[zeros:] {
		carry := int(c)
		for i := range digits {
			carry += int(digits[i]) << 8
			digits[i] = byte(carry % 58)
			carry /= 58
		}
		for carry > 0 {
			digits = append(digits, byte(carry%58))
			carry /= 58
		}
	}
	out := make([]byte, zeros+len(digits))
	for i := 0; i < zeros; i++ {
		out[i] = '1'
	}
	for i, d := range digits {
		out[len(out)-1-i] = base58Alphabet[d]
	}
	return string(out)
}

// base58Decode decodes a Base58 (Bitcoin alphabet) string. Leading '1's
// become leading zero bytes. The error never contains the input.
func base58Decode(s string) ([]byte, error) {
	zeros := 0
	for zeros < len(s) && s[zeros] == '1' {
		zeros++
	}
	// log(58)/log(256) ≈ 0.733; bytes are little-endian base-256.
	out := make([]byte, 0, (len(s)-zeros)*733/1000+1)
	for i := zeros; i < len(s); i++ {
		v := base58Index[s[i]]
		if v < 0 {
			return nil, errBase58Char
		}
		carry := int(v)
		for j := range out {
			carry += int(out[j]) * 58
			out[j] = byte(carry)
			carry >>= 8
		}
		for carry > 0 {
			out = append(out, byte(carry))
			carry >>= 8
		}
	}
	res := make([]byte, zeros+len(out))
	for i, c := range out {
		res[len(res)-1-i] = c
	}
	return res, nil
}

// base58CheckEncode appends the first four bytes of SHA-256(SHA-256(payload))
// and encodes the result in Base58.
func base58CheckEncode(payload []byte) string {
	buf := make([]byte, len(payload), len(payload)+4)
	copy(buf, payload)
	buf = append(buf, checksum4(payload)...)
	s := base58Encode(buf)
	clear(buf)
	return s
}

// base58CheckDecode decodes s and verifies its four-byte checksum.
func base58CheckDecode(s string) ([]byte, error) {
	b, err := base58Decode(s)
	if err != nil {
		return nil, err
	}
	if len(b) < 4 {
		return nil, errBase58Short
	}
	payload, sum := b[:len(b)-4], b[len(b)-4:]
	if !bytes.Equal(checksum4(payload), sum) {
		clear(b)
		return nil, errBase58Checksum
	}
	return payload, nil
}

func checksum4(b []byte) []byte {
	h1 := sha256.Sum256(b)
	h2 := sha256.Sum256(h1[:])
	return h2[:4]
}
