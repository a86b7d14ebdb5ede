package hdwallet

import (
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/stretchr/testify/require"
)

func junkWallet(t testing.TB) *Wallet {
	t.Helper()
	m, err := ParseMnemonic(junkMnemonic)
	require.NoError(t, err)
	w, err := NewWallet(m, "")
	require.NoError(t, err)
	return w
}

func TestJunkMnemonic_WellKnownAddresses(t *testing.T) {
	t.Parallel()
	w := junkWallet(t)
	want := map[uint32]string{
		0: "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
		1: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
	}
	// Through the xpub string, as the invoice API would get it.
	d, err := NewDeriver(w.Deriver().XPub())
	require.NoError(t, err)
	for i, addr := range want {
		got, err := d.Address(i)
		require.NoError(t, err)
		require.Equal(t, addr, got.Hex(), "deriver, index %d", i) // Hex is EIP-55

		got, err = w.Address(i)
		require.NoError(t, err)
		require.Equal(t, addr, got.Hex(), "wallet, index %d", i)
	}
	// The well-known private key of index 0 (Hardhat/Anvil account #0).
	key, err := w.PrivateKey(0)
	require.NoError(t, err)
	require.Equal(t, "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80", hex.EncodeToString(crypto.FromECDSA(key)))
}

func TestDeriver_AgreesWithPrivateDerivationFor1000Indexes(t *testing.T) {
	t.Parallel()
	m, err := GenerateMnemonic(24)
	require.NoError(t, err)
	w, err := NewWallet(m, "")
	require.NoError(t, err)
	d, err := NewDeriver(w.Deriver().XPub())
	require.NoError(t, err)

	indexes := make([]uint32, 0, 1000)
	for i := range uint32(500) {
		indexes = append(indexes, i)
	}
	indexes = append(indexes, MaxIndex, MaxIndex-1)
	for len(indexes) < 1000 {
		indexes = append(indexes, rand.Uint32N(HardenedOffset))
	}
	for _, i := range indexes {
		pub, err := d.Address(i)
		require.NoError(t, err)
		// Private route through go-ethereum's own curve code.
		key, err := w.PrivateKey(i)
		require.NoError(t, err)
		require.Equal(t, crypto.PubkeyToAddress(key.PublicKey), pub, "index %d", i)
		// And the generic BIP-32 path from the master key.
		path, err := DepositPath(i)
		require.NoError(t, err)
		if i < 20 {
			k, err := w.DerivePath(path.String())
			require.NoError(t, err)
			require.Equal(t, pub, k.Address(), "index %d", i)
		}
	}
}

func TestDeriver_IndexOutOfRange(t *testing.T) {
	t.Parallel()
	w := junkWallet(t)
	for _, i := range []uint32{HardenedOffset, HardenedOffset + 1, math.MaxUint32} {
		_, err := w.Deriver().Address(i)
		require.ErrorIs(t, err, ErrIndexOutOfRange)
		_, err = w.Address(i)
		require.ErrorIs(t, err, ErrIndexOutOfRange)
		_, err = w.PrivateKey(i)
		require.ErrorIs(t, err, ErrIndexOutOfRange)
	}
}

func TestNewDeriver_RejectsKeysOtherThanTheAccountXpub(t *testing.T) {
	t.Parallel()
	w := junkWallet(t)
	for path, wantErr := range map[string]error{
		"m":                   ErrNotAccountKey, // master
		"m/44'/60'/0'":        ErrNotAccountKey, // BIP-44 account level, depth 3
		"m/44'/60'/0'/1":      ErrNotAccountKey, // change chain
		"m/44'/60'/0'/0/0":    ErrNotAccountKey, // an address key, depth 5
		"m/44'/60'/0'/0'":     ErrNotAccountKey, // hardened 0
		"m/44'/60'/0'/0/0/0'": ErrNotAccountKey,
	} {
		k, err := w.DerivePath(path)
		require.NoError(t, err)
		_, err = NewDeriver(k.Public().Serialize())
		require.ErrorIs(t, err, wantErr, path)
	}
	account, err := w.DerivePath(AccountPath)
	require.NoError(t, err)
	_, err = NewDeriver(account.Serialize()) // the xprv
	require.ErrorIs(t, err, ErrNotAccountKey)
	require.NotContains(t, err.Error(), account.Serialize()[4:])

	d, err := NewDeriver(account.Public().Serialize())
	require.NoError(t, err)
	require.Equal(t, w.Deriver().XPub(), d.XPub())

	_, err = NewDeriver("xpub-not-really")
	require.ErrorIs(t, err, ErrInvalidExtendedKey)
}

func TestDeriver_SafeForConcurrentUse(t *testing.T) {
	t.Parallel()
	d := junkWallet(t).Deriver()
	want := make([]common.Address, 64)
	for i := range want {
		var err error
		want[i], err = d.Address(uint32(i))
		require.NoError(t, err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for r := range 4 {
				for i := range want {
					got, err := d.Address(uint32((i + g + r) % len(want)))
					if err != nil || got != want[(i+g+r)%len(want)] {
						errs <- fmt.Errorf("goroutine %d index %d: %v %v", g, i, got, err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

func TestDeriver_StringHidesXpub(t *testing.T) {
	t.Parallel()
	d := junkWallet(t).Deriver()
	require.NotContains(t, d.String(), d.XPub()[4:])
	require.Contains(t, d.String(), AccountPath)
}

func TestWallet_SignTxIsRecoverableToTheDepositAddress(t *testing.T) {
	t.Parallel()
	w := junkWallet(t)
	var s Signer = w
	signer := types.LatestSignerForChainID(big.NewInt(1337))
	to := common.HexToAddress("0x000000000000000000000000000000000000dEaD")
	tx := types.NewTx(&types.DynamicFeeTx{
		ChainID: big.NewInt(1337), Nonce: 3, GasTipCap: big.NewInt(1), GasFeeCap: big.NewInt(2),
		Gas: 21000, To: &to, Value: big.NewInt(1e18),
	})
	for _, i := range []uint32{0, 5, 1 << 20} {
		signed, err := s.SignTx(context.Background(), i, tx, signer)
		require.NoError(t, err)
		from, err := types.Sender(signer, signed)
		require.NoError(t, err)
		addr, err := s.Address(i)
		require.NoError(t, err)
		require.Equal(t, addr, from, "index %d", i)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.SignTx(ctx, 0, tx, signer)
	require.ErrorIs(t, err, context.Canceled)
}

func TestWallet_SweepKeyIsAccountOne(t *testing.T) {
	t.Parallel()
	w := junkWallet(t)
	key, err := w.SweepKey()
	require.NoError(t, err)
	k, err := w.DerivePath("m/44'/60'/1'/0/0")
	require.NoError(t, err)
	require.Equal(t, k.Address(), crypto.PubkeyToAddress(key.PublicKey))
	for i := range uint32(100) {
		addr, err := w.Deriver().Address(i)
		require.NoError(t, err)
		require.NotEqual(t, addr, k.Address())
	}
}

func TestWallet_DifferentPassphraseDifferentAddresses(t *testing.T) {
	t.Parallel()
	m, err := ParseMnemonic(junkMnemonic)
	require.NoError(t, err)
	w, err := NewWallet(m, "TREZOR")
	require.NoError(t, err)
	addr, err := w.Address(0)
	require.NoError(t, err)
	require.NotEqual(t, "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266", addr.Hex())
}

func TestWallet_WipeStopsPrivateKeysButNotDeriver(t *testing.T) {
	t.Parallel()
	w := junkWallet(t)
	w.Wipe()
	w.Wipe() // idempotent
	_, err := w.PrivateKey(0)
	require.ErrorIs(t, err, ErrWiped)
	_, err = w.SweepKey()
	require.ErrorIs(t, err, ErrWiped)
	_, err = w.SignTx(context.Background(), 0, types.NewTx(&types.LegacyTx{}), types.HomesteadSigner{})
	require.ErrorIs(t, err, ErrWiped)
	addr, err := w.Deriver().Address(0)
	require.NoError(t, err)
	require.Equal(t, "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266", addr.Hex())
}

func TestWallet_RedactedInFmtAndSlog(t *testing.T) {
	t.Parallel()
	w := junkWallet(t)
	key, err := w.PrivateKey(0)
	require.NoError(t, err)
	privHex := hex.EncodeToString(crypto.FromECDSA(key))
	out := fmt.Sprintf("%v %+v %#v %s %x %d", w, w, w, w, w, w) +
		fmt.Sprintf("%v %+v %#v %s %x %d", *w, *w, *w, *w, *w, *w)
	var buf strings.Builder
	slog.New(slog.NewTextHandler(&buf, nil)).Info("wallet", "w", w, "v", *w)
	out += buf.String()
	require.NotContains(t, out, privHex)
	require.NotContains(t, out, "xprv")
	require.Contains(t, out, "REDACTED")
}

func TestWallet_DeriverAccountKeyIsPublicAccountNode(t *testing.T) {
	t.Parallel()
	w := junkWallet(t)
	k := w.Deriver().AccountKey()
	require.False(t, k.IsPrivate())
	require.Equal(t, uint8(4), k.Depth())
	require.Equal(t, w.Deriver().XPub(), k.Serialize())
	require.Equal(t, "[REDACTED]", w.String())
	require.Equal(t, "hdwallet.Wallet{[REDACTED]}", w.GoString())
	m, err := ParseMnemonic(junkMnemonic)
	require.NoError(t, err)
	require.Equal(t, "[REDACTED]", m.String())
	require.Equal(t, "hdwallet.Mnemonic{[REDACTED]}", m.GoString())
}

func TestDeriver_AddressesAreTheAddressesOfTheRange(t *testing.T) {
	t.Parallel()
	d := junkWallet(t).Deriver()
	for _, r := range []struct {
		first uint32
		n     int
	}{{0, 0}, {0, 1}, {0, 300}, {1 << 20, 17}, {MaxIndex - 5, 6}} {
		addrs, err := d.Addresses(r.first, r.n)
		require.NoError(t, err)
		require.Len(t, addrs, r.n)
		for i, got := range addrs {
			want, err := d.Address(r.first + uint32(i))
			require.NoError(t, err)
			require.Equal(t, want, got, "index %d", r.first+uint32(i))
		}
	}
	for _, r := range []struct {
		first uint32
		n     int
	}{{MaxIndex, 2}, {HardenedOffset, 1}, {0, -1}} {
		_, err := d.Addresses(r.first, r.n)
		require.ErrorIs(t, err, ErrIndexOutOfRange, "%d indexes from %d", r.n, r.first)
	}
}
