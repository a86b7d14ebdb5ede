package webhook_test

import (
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/webhook"
)

func TestCheckPublicHost_PrivateLiteralsAndNumericForms_Refused(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		"http://127.0.0.1:9/x", "http://169.254.169.254/latest/meta-data/", "http://[::1]/", "http://0/",
		"http://2130706433/", "http://0x7f000001/", "http://0x7F.1/", "http://0177.0.0.1/", "http://127.1/",
		"http://017700000001/", "http://10.1.2.3/", "http://172.16.0.1/", "http://192.168.0.1/", "http://100.64.0.1/",
		"http://0.0.0.0/", "http://[::]/", "http://[fe80::1%25eth0]/", "http://[::ffff:10.0.0.1]/", "http://[fc00::1]/",
		"http://224.0.0.1/", "http://255.255.255.255/", "http://localhost/", "http://LocalHost./", "http://a.localhost/",
		"http://1.2.3.04/", "http://example.123/",
	} {
		u, err := url.Parse(raw)
		require.NoError(t, err, raw)
		require.ErrorIs(t, webhook.CheckPublicHost(u.Hostname()), webhook.ErrNotPublicHost, raw)
	}
	require.ErrorIs(t, webhook.CheckPublicHost(""), webhook.ErrNotPublicHost)
}

func TestCheckPublicHost_PublicLiteralsAndNames_Accepted(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		"https://hooks.example.com/x", "http://93.184.216.34:8080/", "https://[2606:4700:4700::1111]/",
		"https://shop.example./", "https://0x.example/", "https://123.example.com/", "https://xn--bcher-kva.example/",
	} {
		u, err := url.Parse(raw)
		require.NoError(t, err, raw)
		require.NoError(t, webhook.CheckPublicHost(u.Hostname()), raw)
	}
}
