package store_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

// mixed has letters in its EIP-55 form, so lower case and checksum differ.
var mixed = common.HexToAddress("0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed")

// withAddresses sets every common.Address and *common.Address field of the
// struct v points to to mixed.
func withAddresses(v any) {
	rv := reflect.ValueOf(v).Elem()
	for i := range rv.NumField() {
		f := rv.Field(i)
		switch f.Type() {
		case reflect.TypeOf(common.Address{}):
			f.Set(reflect.ValueOf(mixed))
		case reflect.TypeOf(&common.Address{}):
			a := mixed
			f.Set(reflect.ValueOf(&a))
		}
	}
}

// jsonNames is the set of member names v's struct tags promise.
func jsonNames(v any) []string {
	var out []string
	rt := reflect.TypeOf(v).Elem()
	for i := range rt.NumField() {
		name, opts, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		if name == "-" || strings.Contains(opts, "omitempty") {
			continue
		}
		out = append(out, name)
	}
	return out
}

func TestRecordJSON_EveryAddress_EIP55(t *testing.T) {
	t.Parallel()
	records := map[string]any{
		"Block":       &store.Block{},
		"Transaction": &store.Transaction{}, "Payment": &store.Payment{}, "SweepTx": &store.SweepTx{},
		"TokenTransfer": &store.TokenTransfer{},
	}
	for name, rec := range records {
		withAddresses(rec)
		b, err := json.Marshal(rec)
		require.NoError(t, err, name)
		require.NotContains(t, string(b), strings.ToLower(mixed.Hex()), "%s: %s", name, b)
		require.Contains(t, string(b), mixed.Hex(), "%s: %s", name, b)
		var got map[string]any
		require.NoError(t, json.Unmarshal(b, &got))
		for _, member := range jsonNames(rec) {
			require.Contains(t, got, member, "%s keeps every member", name)
		}
		// Through a value, as an embedded field and in an event snapshot too.
		b, err = json.Marshal(reflect.ValueOf(rec).Elem().Interface())
		require.NoError(t, err)
		require.Contains(t, string(b), mixed.Hex(), name)
	}
}

func TestTransactionJSON_ContractCreation_ToNull(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(store.Transaction{From: mixed})
	require.NoError(t, err)
	require.Contains(t, string(b), `"to":null`)
}

func TestParseAddress_Case(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{mixed.Hex(), strings.ToLower(mixed.Hex()), "0x" + strings.ToUpper(mixed.Hex()[2:])} {
		a, err := store.ParseAddress(ok)
		require.NoError(t, err, ok)
		require.Equal(t, mixed, a)
	}
	bad := "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeD" // last letter's case flipped
	_, err := store.ParseAddress(bad)
	require.ErrorIs(t, err, store.ErrAddressChecksum)
	for _, s := range []string{"", "0x", "5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed", "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAe", "0xZZAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"} {
		_, err := store.ParseAddress(s)
		require.Error(t, err, s)
	}
	var c store.ChecksumAddress
	require.Error(t, json.Unmarshal([]byte(`"`+bad+`"`), &c))
	require.NoError(t, json.Unmarshal([]byte(`"`+strings.ToLower(mixed.Hex())+`"`), &c))
	require.Equal(t, mixed.Hex(), c.String())
}
