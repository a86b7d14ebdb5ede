package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestServe_ChainExplorerURLs_CheckedAndHandedToTheCheckoutPage(t *testing.T) {
	t.Parallel()
	base := map[string]string{"DATABASE_URL": "x", "RPC_URL": "y"}
	e, err := readServeEnv(envOf(base))
	require.NoError(t, err)
	require.Empty(t, e.explorerTxURL, "none by default")

	ok := map[string]string{"DATABASE_URL": "x", "RPC_URL": "y",
		"CHAIN_EXPLORER_TX_URL": "https://explorer.example/tx/{tx}", "CHAIN_EXPLORER_ADDRESS_URL": "https://explorer.example/address/{address}"}
	e, err = readServeEnv(envOf(ok))
	require.NoError(t, err)
	require.Equal(t, "https://explorer.example/tx/{tx}", e.explorerTxURL)
	require.Equal(t, "https://explorer.example/address/{address}", e.explorerAddressURL)

	for name, v := range map[string]string{
		"CHAIN_EXPLORER_TX_URL":      "https://explorer.example/tx/",
		"CHAIN_EXPLORER_ADDRESS_URL": "javascript:alert('{address}')",
	} {
		bad := map[string]string{"DATABASE_URL": "x", "RPC_URL": "y", name: v}
		_, err := readServeEnv(envOf(bad))
		require.ErrorContains(t, err, name+"=")
	}
}

// NATIVE_SYMBOL names the chain's coin (an evmd chain's own, not "ETH");
// a symbol wallets would refuse is an error naming the variable.
func TestServe_NativeSymbol_CheckedAtStart(t *testing.T) {
	t.Parallel()
	e, err := readServeEnv(envOf(map[string]string{"DATABASE_URL": "x", "RPC_URL": "y", "NATIVE_SYMBOL": "TEST"}))
	require.NoError(t, err)
	require.Equal(t, "TEST", e.nativeSymbol)
	for _, bad := range []string{"T", "TOOLONGX", "ET H", "<b>"} {
		_, err := readServeEnv(envOf(map[string]string{"DATABASE_URL": "x", "RPC_URL": "y", "NATIVE_SYMBOL": bad}))
		require.ErrorContains(t, err, `NATIVE_SYMBOL="`+bad+`": want 2 to 6 ASCII letters or digits`)
	}
}

// SMTP_URL (or SMTP_URL_FILE: the URL may hold a password) with SMTP_FROM
// gives the dashboard its mailer; one without the other, or a URL that is
// not smtp://host:port, is an error that names them and never quotes the
// password.
func TestServe_SMTP_MailerForTheDashboard(t *testing.T) {
	t.Parallel()
	base := func(kv ...string) map[string]string {
		m := map[string]string{"DATABASE_URL": "x", "RPC_URL": "y"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	e, err := readServeEnv(envOf(base()))
	require.NoError(t, err)
	require.Nil(t, e.mailer, "no mail server by default")

	e, err = readServeEnv(envOf(base("SMTP_URL", "smtp://pay:hunter2secret@mail.example:587", "SMTP_FROM", "Pay <pay@example.com>")))
	require.NoError(t, err)
	require.NotNil(t, e.mailer)
	require.Equal(t, "dashboard.SMTPMailer{mail.example:587}", e.mailer.String(), "the password stays out of logs")

	file := filepath.Join(t.TempDir(), "smtp-url")
	require.NoError(t, os.WriteFile(file, []byte("smtp://pay:hunter2secret@mail.example:587\n"), 0o600))
	e, err = readServeEnv(envOf(base("SMTP_URL_FILE", file, "SMTP_FROM", "pay@example.com")))
	require.NoError(t, err)
	require.NotNil(t, e.mailer)

	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{base("SMTP_URL", "smtp://mail.example:25"), "SMTP_URL is set without SMTP_FROM"},
		{base("SMTP_FROM", "pay@example.com"), "SMTP_FROM is set without SMTP_URL"},
		{base("SMTP_URL", "https://pay:hunter2secret@mail.example", "SMTP_FROM", "pay@example.com"), "SMTP_URL, SMTP_FROM: dashboard: the SMTP URL must be smtp://"},
		{base("SMTP_URL", "smtp://mail.example:25", "SMTP_URL_FILE", file, "SMTP_FROM", "pay@example.com"), "SMTP_URL and SMTP_URL_FILE are both set"},
	} {
		_, err := readServeEnv(envOf(c.env))
		require.ErrorContains(t, err, c.want)
		require.NotContains(t, err.Error(), "hunter2secret")
	}
}

// FINALITY picks the chain's finality mode; instant and tag count no
// confirmations, so CONFIRMATIONS beside them is refused, naming both.
func TestServe_Finality_ModesAndConfirmations(t *testing.T) {
	t.Parallel()
	env := func(kv ...string) map[string]string {
		m := map[string]string{"DATABASE_URL": "x", "RPC_URL": "y"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	e, err := readServeEnv(envOf(env()))
	require.NoError(t, err)
	require.Equal(t, 12, e.confirmations)
	for _, mode := range []string{"instant", "tag"} {
		e, err := readServeEnv(envOf(env("FINALITY", mode)))
		require.NoError(t, err)
		require.Equal(t, mode, e.finality)
		require.Zero(t, e.confirmations)
		_, err = readServeEnv(envOf(env("FINALITY", mode, "CONFIRMATIONS", "3")))
		require.ErrorContains(t, err, `FINALITY="`+mode+`": `+mode+` finality takes no CONFIRMATIONS`)
	}
	e, err = readServeEnv(envOf(env("FINALITY", "depth", "CONFIRMATIONS", "3")))
	require.NoError(t, err)
	require.Equal(t, 3, e.confirmations)
	_, err = readServeEnv(envOf(env("FINALITY", "safe")))
	require.ErrorContains(t, err, `FINALITY="safe"`)
}
