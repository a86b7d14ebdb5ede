package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

func brandingTests() []test {
	return []test{
		{"Branding_NoneUntilPut", testBrandingNone},
		{"Branding_PutReplacesEverything", testBrandingPutReplaces},
		{"Branding_UnknownMerchant_NotFound", testBrandingUnknownMerchant},
		{"Branding_RefusesWhatIsNotAColourOrAnAcceptedImageType", testBrandingChecks},
	}
}

func testBrandingNone(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	_, err := st.GetMerchantBranding(ctx, m.ID)
	require.ErrorIs(t, err, store.ErrNotFound)
}

func testBrandingPutReplaces(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	other := newMerchant(t, st)
	logo := randBytes(32 << 10)
	b := store.MerchantBranding{MerchantID: m.ID, AccentColor: "#1a7f37", Logo: logo, LogoContentType: "image/png", UpdatedAt: now()}
	require.NoError(t, st.PutMerchantBranding(ctx, b))
	got, err := st.GetMerchantBranding(ctx, m.ID)
	require.NoError(t, err)
	require.Equal(t, m.ID, got.MerchantID)
	require.Equal(t, "#1a7f37", got.AccentColor)
	require.Equal(t, logo, got.Logo, "the logo's bytes, exactly")
	require.Equal(t, "image/png", got.LogoContentType)
	requireTime(t, now(), got.UpdatedAt)
	_, err = st.GetMerchantBranding(ctx, other.ID)
	require.ErrorIs(t, err, store.ErrNotFound, "one merchant's branding is not another's")

	// A second put replaces every field: the logo removed, the colour kept.
	later := now().Add(time.Hour)
	require.NoError(t, st.InTx(ctx, func(tx store.Tx) error {
		return tx.PutMerchantBranding(ctx, store.MerchantBranding{MerchantID: m.ID, AccentColor: "#000000", UpdatedAt: later})
	}))
	got, err = st.GetMerchantBranding(ctx, m.ID)
	require.NoError(t, err)
	require.Equal(t, "#000000", got.AccentColor)
	require.Nil(t, got.Logo)
	require.Empty(t, got.LogoContentType)
	requireTime(t, later, got.UpdatedAt)
}

func testBrandingUnknownMerchant(t *testing.T, st store.Store) {
	err := st.PutMerchantBranding(ctx, store.MerchantBranding{MerchantID: 987654, UpdatedAt: now()})
	require.ErrorIs(t, err, store.ErrNotFound)
}

func testBrandingChecks(t *testing.T, st store.Store) {
	m := newMerchant(t, st)
	for _, b := range []store.MerchantBranding{
		{AccentColor: "red"},
		{AccentColor: "#ABCDEF"}, // stored lower case only
		{AccentColor: "#12345"},
		{Logo: []byte("<svg/>"), LogoContentType: "image/svg+xml"},
		{Logo: randBytes(65537), LogoContentType: "image/png"},
	} {
		b.MerchantID, b.UpdatedAt = m.ID, now()
		err := st.PutMerchantBranding(ctx, b)
		require.Error(t, err, "%+v", b.AccentColor)
		require.False(t, errors.Is(err, store.ErrNotFound))
	}
	_, err := st.GetMerchantBranding(ctx, m.ID)
	require.ErrorIs(t, err, store.ErrNotFound, "nothing half-written")
}
