package invoice_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/invoice"
	"github.com/evmpay/evmpay/store"
)

func TestAdminCreateMerchant_201WithCredentialsShownOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	res := e.do("POST", "/v1/admin/merchants", adminToken,
		`{"webhook_url":"https://shop.example/hook","settlement_address":"0x70997970C51812dc3A010C7d01b50e0d17dc79C8"}`)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	body := res.json(t)
	for _, k := range []string{"id", "api_key", "webhook_secret", "webhook_url", "settlement_address"} {
		require.Contains(t, body, k)
	}
	require.Equal(t, "https://shop.example/hook", body["webhook_url"])
	require.Equal(t, "0x70997970C51812dc3A010C7d01b50e0d17dc79C8", body["settlement_address"])
	apiKey, secret := body["api_key"].(string), body["webhook_secret"].(string)
	require.Regexp(t, `^evmpay_sk_[A-Za-z0-9_-]{43}$`, apiKey, "recognisable prefix, 256 random bits")
	require.Regexp(t, `^whsec_[A-Za-z0-9+/]{43}=$`, secret)
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	require.NoError(t, err)
	require.Len(t, raw, 32)
	require.Equal(t, apiKey[:16], body["api_key_prefix"])
	id := int64(body["id"].(float64))
	require.Equal(t, fmt.Sprintf("https://pay.example.com/v1/admin/merchants/%d", id), res.Header.Get("Location"))

	// Never shown again.
	profile := e.do("GET", "/v1/merchant", apiKey, "")
	require.Equal(t, http.StatusOK, profile.Status)
	require.NotContains(t, profile.json(t), "api_key")
	require.NotContains(t, profile.json(t), "webhook_secret")
	require.False(t, bytes.Contains(profile.Body, []byte(secret)))
}

func TestAdminCreateMerchant_NeedsTheOperatorToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	body := `{"settlement_address":"0x70997970C51812dc3A010C7d01b50e0d17dc79C8"}`
	requireProblem(t, e.do("POST", "/v1/admin/merchants", "", body), 401, "unauthorized", "")
	requireProblem(t, e.do("POST", "/v1/admin/merchants", "wrong", body), 401, "unauthorized", "")
	m := e.newMerchant()
	requireProblem(t, e.do("POST", "/v1/admin/merchants", m.APIKey, body), 401, "unauthorized", "")

	off := newEnv(t, func(c *invoice.Config) { c.AdminToken = "" })
	requireProblem(t, off.do("POST", "/v1/admin/merchants", "", body), 401, "unauthorized", "")
	requireProblem(t, off.do("POST", "/v1/admin/merchants", adminToken, body), 401, "unauthorized", "")
	all, err := off.st.ListMerchants(ctx)
	require.NoError(t, err)
	require.Empty(t, all, "no token configured: the admin API is off")
}

func TestAdminCreateMerchant_InvalidBodies_400(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cases := []struct{ body, code, field string }{
		{`{}`, "missing_field", "settlement_address"},
		{`{"settlement_address":"0x1234"}`, "invalid_address", "settlement_address"},
		{`{"settlement_address":"70997970C51812dc3A010C7d01b50e0d17dc79C8"}`, "invalid_address", "settlement_address"},
		{`{"settlement_address":"0x70997970c51812dc3A010C7d01b50e0d17dc79C8"}`, "invalid_address", "settlement_address"}, // bad checksum
		{`{"settlement_address":"0x0000000000000000000000000000000000000000"}`, "invalid_address", "settlement_address"},
		{`{"settlement_address":"0x70997970C51812dc3A010C7d01b50e0d17dc79C8","webhook_url":"ftp://x"}`, "invalid_field", "webhook_url"},
		{`{"settlement_address":"0x70997970C51812dc3A010C7d01b50e0d17dc79C8","webhook_url":"/relative"}`, "invalid_field", "webhook_url"},
		{`{"settlement_address":"0x70997970C51812dc3A010C7d01b50e0d17dc79C8","api_key":"mine"}`, "unknown_field", "api_key"},
	}
	for _, tc := range cases {
		requireProblem(t, e.do("POST", "/v1/admin/merchants", adminToken, tc.body), 400, tc.code, tc.field)
	}
	// All lower or all upper case needs no checksum.
	res := e.do("POST", "/v1/admin/merchants", adminToken, `{"settlement_address":"0x70997970c51812dc3a010c7d01b50e0d17dc79c8"}`)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
}

func TestCreateMerchant_CredentialsStoredOnlyAsDigestHashAndCiphertext(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.newMerchant()
	stored, err := e.st.GetMerchant(ctx, m.ID)
	require.NoError(t, err)

	// Lookup digest: HMAC-SHA256 under a key derived from PAY_SECRET_KEY
	// (not the secret key itself).
	require.Equal(t, e.creds.APIKeyDigest(m.APIKey), stored.APIKeyDigest)
	direct := hmac.New(sha256.New, testSecretKey)
	direct.Write([]byte(m.APIKey))
	require.NotEqual(t, direct.Sum(nil), stored.APIKeyDigest, "the lookup key is a derived subkey")

	// Argon2id with OWASP parameters, in PHC format, verifying the key.
	require.True(t, strings.HasPrefix(stored.APIKeyHash, "$argon2id$v=19$m=19456,t=2,p=1$"), stored.APIKeyHash)
	ok, err := invoice.VerifyAPIKey(m.APIKey, stored.APIKeyHash)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = invoice.VerifyAPIKey(m.APIKey+"x", stored.APIKeyHash)
	require.NoError(t, err)
	require.False(t, ok)

	// The webhook secret is ciphertext, bound to the merchant id.
	require.False(t, bytes.Contains(stored.WebhookSecretCiphertext, []byte(m.WebhookSecret)))
	require.False(t, bytes.Contains(stored.WebhookSecretCiphertext, []byte(strings.TrimPrefix(m.WebhookSecret, "whsec_"))))
	secret, err := e.creds.WebhookSecret(stored)
	require.NoError(t, err)
	require.Equal(t, m.WebhookSecret, secret)
	moved := stored
	moved.ID++
	_, err = e.creds.WebhookSecret(moved)
	require.Error(t, err, "the ciphertext does not open for another merchant id")
	require.NotContains(t, err.Error(), m.WebhookSecret)

	other, err := invoice.NewCredentials(bytes.Repeat([]byte{9}, 32))
	require.NoError(t, err)
	_, err = other.WebhookSecret(stored)
	require.Error(t, err, "nor under another PAY_SECRET_KEY")
}

func TestNewCredentials_RefusesShortKeys(t *testing.T) {
	t.Parallel()
	_, err := invoice.NewCredentials(make([]byte, 31))
	require.ErrorIs(t, err, invoice.ErrSecretKey)
	c, err := invoice.NewCredentials(make([]byte, 32))
	require.NoError(t, err)
	require.NotContains(t, fmt.Sprintf("%v %+v %#v %s", c, c, c, c), "\x00\x00")
	require.Equal(t, "invoice.Credentials{[REDACTED]}", fmt.Sprint(c))
}

func TestCreateMerchant_GoAPIWithoutAService(t *testing.T) {
	t.Parallel()
	st := newPostgres(t)
	creds, err := invoice.NewCredentials(testSecretKey)
	require.NoError(t, err)
	created, err := invoice.CreateMerchant(ctx, st, creds, invoice.MerchantRules{}, invoice.MerchantParams{
		Name: "cli", SettlementAddress: common.HexToAddress("0x70997970C51812dc3A010C7d01b50e0d17dc79C8")})
	require.NoError(t, err)
	require.NotZero(t, created.Merchant.ID)
	e := newEnvOn(t, st)
	res := e.do("GET", "/v1/merchant", created.APIKey, "")
	require.Equal(t, http.StatusOK, res.Status)
	require.Equal(t, "cli", res.json(t)["name"])

	_, err = invoice.CreateMerchant(ctx, st, creds, invoice.MerchantRules{}, invoice.MerchantParams{})
	require.ErrorIs(t, err, invoice.ErrInvalidMerchant)
}

func TestAuthenticate_WrongMissingRotatedOrDisabled_Same401(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.newMerchant()
	rotated := e.newMerchant()
	disabled := e.newMerchant()
	require.Equal(t, http.StatusOK, e.do("GET", "/v1/merchant", rotated.APIKey, "").Status)
	require.Equal(t, http.StatusOK, e.do("GET", "/v1/merchant", disabled.APIKey, "").Status)
	_, _, err := e.svc.RotateAPIKey(ctx, rotated.ID)
	require.NoError(t, err)
	_, err = e.svc.DisableMerchant(ctx, disabled.ID)
	require.NoError(t, err)

	wrong := m.APIKey[:len(m.APIKey)-1] + "A"
	if wrong == m.APIKey {
		wrong = m.APIKey[:len(m.APIKey)-1] + "B"
	}
	var bodies [][]byte
	for name, header := range map[string]string{
		"missing":      "",
		"not bearer":   "Basic " + base64.StdEncoding.EncodeToString([]byte("u:p")),
		"malformed":    "Bearer nope",
		"wrong":        "Bearer " + wrong,
		"rotated":      "Bearer " + rotated.APIKey,
		"disabled":     "Bearer " + disabled.APIKey,
		"lookup token": "Bearer AAAAAAAAAAAAAAAAAAAAAA",
	} {
		req, err := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/v1/merchant", nil)
		require.NoError(t, err)
		if header != "" {
			req.Header.Set("Authorization", header)
		}
		res := send(t, req)
		requireProblem(t, res, 401, "unauthorized", "")
		require.Equal(t, `Bearer realm="evmpay"`, res.Header.Get("WWW-Authenticate"), name)
		bodies = append(bodies, res.Body)
	}
	for _, b := range bodies {
		require.Equal(t, bodies[0], b, "no hint of which")
	}
	// The scheme name is case-insensitive.
	res := e.do("GET", "/v1/merchant", "", "", "Authorization", "bearer "+m.APIKey)
	require.Equal(t, http.StatusOK, res.Status)
}

func TestAuthenticate_Argon2idOncePerKeyPerProcess(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.newMerchant()
	auth := e.svc.Authenticator()
	require.Zero(t, auth.HashesRun())
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := e.do("GET", "/v1/merchant", m.APIKey, "")
			require.Equal(t, http.StatusOK, res.Status)
		}()
	}
	wg.Wait()
	for range 10 {
		require.Equal(t, http.StatusOK, e.do("GET", "/v1/merchant", m.APIKey, "").Status)
	}
	require.EqualValues(t, 1, auth.HashesRun(), "concurrent first requests share one verification; later ones hit the cache")

	// A wrong key never reaches Argon2id: its digest finds no merchant.
	requireProblem(t, e.do("GET", "/v1/merchant", "evmpay_sk_"+strings.Repeat("A", 43), ""), 401, "unauthorized", "")
	require.EqualValues(t, 1, auth.HashesRun())
}

func TestAuthenticate_DigestMatchButHashMismatch_401(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.newMerchant()
	// A row whose Argon2id hash does not verify the key (a tampered or
	// corrupted row) is refused even though the digest matches.
	stored, err := e.st.GetMerchant(ctx, m.ID)
	require.NoError(t, err)
	other := e.newMerchant()
	otherRow, err := e.st.GetMerchant(ctx, other.ID)
	require.NoError(t, err)
	stored.APIKeyHash = otherRow.APIKeyHash
	require.NoError(t, e.st.UpdateMerchant(ctx, stored))
	requireProblem(t, e.do("GET", "/v1/merchant", m.APIKey, ""), 401, "unauthorized", "")
}

func TestAuthenticator_IsUsableByOtherPackages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.newMerchant()
	// The interface another package (webhook) declares.
	var a interface {
		Authenticate(*http.Request) (store.Merchant, error)
	} = e.svc
	req, err := http.NewRequest("GET", "/v1/webhook-deliveries", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+m.APIKey)
	got, err := a.Authenticate(req)
	require.NoError(t, err)
	require.Equal(t, m.ID, got.ID)
	req.Header.Set("Authorization", "Bearer "+m.APIKey+"x")
	_, err = a.Authenticate(req)
	require.ErrorIs(t, err, invoice.ErrUnauthorized)

	// And the webhook secret interface.
	var ws interface {
		WebhookSecret(store.Merchant) (string, error)
	} = e.svc.Credentials()
	s, err := ws.WebhookSecret(got)
	require.NoError(t, err)
	require.Equal(t, m.WebhookSecret, s)
}

func TestRotateAPIKey_OldKeyStopsWorkingAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.newMerchant()
	e.mustCreate(m.APIKey, "before", oneEther)
	res := e.do("POST", "/v1/merchant/api-key/rotate", m.APIKey, "")
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	newKey := res.json(t)["api_key"].(string)
	require.NotEqual(t, m.APIKey, newKey)
	require.Equal(t, newKey[:16], res.json(t)["api_key_prefix"])

	requireProblem(t, e.do("GET", "/v1/merchant", m.APIKey, ""), 401, "unauthorized", "")
	requireProblem(t, e.createInvoice(m.APIKey, "after", oneEther), 401, "unauthorized", "")
	require.Equal(t, http.StatusOK, e.do("GET", "/v1/merchant", newKey, "").Status)
	// Idempotency keys belong to the merchant, not to the api_key.
	replay := e.createInvoice(newKey, "before", oneEther)
	require.Equal(t, http.StatusCreated, replay.Status)
	require.Equal(t, "true", replay.Header.Get("Idempotent-Replayed"))

	// A second Service (another replica) sharing the database agrees.
	replica := newEnvOn(t, e.st)
	requireProblem(t, replica.do("GET", "/v1/merchant", m.APIKey, ""), 401, "unauthorized", "")
	require.Equal(t, http.StatusOK, replica.do("GET", "/v1/merchant", newKey, "").Status)
}

func TestRotateAPIKey_OnOtherReplica_OldKeyFailsHere(t *testing.T) {
	t.Parallel()
	a := newEnv(t)
	m := a.newMerchant()
	require.Equal(t, http.StatusOK, a.do("GET", "/v1/merchant", m.APIKey, "").Status) // cached as verified here
	b := newEnvOn(t, a.st)
	res := b.do("POST", "/v1/merchant/api-key/rotate", m.APIKey, "")
	require.Equal(t, http.StatusOK, res.Status)
	requireProblem(t, a.do("GET", "/v1/merchant", m.APIKey, ""), 401, "unauthorized", "")
}

func TestAdminRotateAPIKey_RecoversALostKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.newMerchant()
	requireProblem(t, e.do("POST", fmt.Sprintf("/v1/admin/merchants/%d/api-key/rotate", m.ID), m.APIKey, ""), 401, "unauthorized", "")
	res := e.do("POST", fmt.Sprintf("/v1/admin/merchants/%d/api-key/rotate", m.ID), adminToken, "")
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	newKey := res.json(t)["api_key"].(string)
	requireProblem(t, e.do("GET", "/v1/merchant", m.APIKey, ""), 401, "unauthorized", "")
	require.Equal(t, http.StatusOK, e.do("GET", "/v1/merchant", newKey, "").Status)
	requireProblem(t, e.do("POST", "/v1/admin/merchants/999999/api-key/rotate", adminToken, ""), 404, "not_found", "")
	requireProblem(t, e.do("POST", "/v1/admin/merchants/x/api-key/rotate", adminToken, ""), 404, "not_found", "")
}

func TestRotateWebhookSecret_NewSecretShownOnceAndStoredSealed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.newMerchant()
	res := e.do("POST", "/v1/merchant/webhook-secret/rotate", m.APIKey, "")
	require.Equal(t, http.StatusOK, res.Status)
	secret := res.json(t)["webhook_secret"].(string)
	require.NotEqual(t, m.WebhookSecret, secret)
	require.NotContains(t, res.json(t), "api_key")
	stored, err := e.st.GetMerchant(ctx, m.ID)
	require.NoError(t, err)
	got, err := e.creds.WebhookSecret(stored)
	require.NoError(t, err)
	require.Equal(t, secret, got)
	require.Equal(t, http.StatusOK, e.do("GET", "/v1/merchant", m.APIKey, "").Status, "the api_key is unchanged")
}

func TestUpdateMerchant_ChangesWebhookURLAndSettlementAddress(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.newMerchant()
	e.clock.Advance(1e9)
	res := e.do("PATCH", "/v1/merchant", m.APIKey,
		`{"webhook_url":"https://new.example/hook","settlement_address":"0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"}`)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	body := res.json(t)
	require.Equal(t, "https://new.example/hook", body["webhook_url"])
	require.Equal(t, "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC", body["settlement_address"])
	require.Equal(t, "shop", body["name"], "left-out members keep their value")
	require.NotEqual(t, body["created_at"], body["updated_at"])
	stored, err := e.st.GetMerchant(ctx, m.ID)
	require.NoError(t, err)
	require.Equal(t, common.HexToAddress("0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"), stored.SettlementAddress)

	requireProblem(t, e.do("PATCH", "/v1/merchant", m.APIKey, `{"settlement_address":"0xnope"}`), 400, "invalid_address", "settlement_address")
	requireProblem(t, e.do("PATCH", "/v1/merchant", m.APIKey, `{"webhook_url":"javascript:alert(1)"}`), 400, "invalid_field", "webhook_url")
	requireProblem(t, e.do("PATCH", "/v1/merchant", m.APIKey, `{"api_key_prefix":"x"}`), 400, "unknown_field", "api_key_prefix")
	requireProblem(t, e.do("PATCH", "/v1/merchant", "", `{}`), 401, "unauthorized", "")
	// Clearing the webhook URL is allowed.
	res = e.do("PATCH", "/v1/merchant", m.APIKey, `{"webhook_url":""}`)
	require.Equal(t, http.StatusOK, res.Status)
	require.Equal(t, "", res.json(t)["webhook_url"])
}
