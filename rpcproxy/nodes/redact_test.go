package nodes_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/rpcproxy/nodes"
)

func TestRedactURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"http://127.0.0.1:8545":                                   "http://127.0.0.1:8545",
		"https://user:pw123456@node.example/":                     "https://user:xxxxx@node.example/",
		"https://key0123456789@node.example/":                     "https://xxxxx@node.example/",
		"https://mainnet.example/v3/0123456789abcdef0123456789ab": "https://mainnet.example/v3/xxxxx",
		"https://node.example/rpc?apikey=K&x=1":                   "https://node.example/rpc?apikey=xxxxx&x=xxxxx",
		"https://node.example/evm/mainnet":                        "https://node.example/evm/mainnet",
		"::not a url":                                             "(unparsable URL)",
	} {
		require.Equal(t, want, nodes.RedactURL(in), in)
	}
}

// A node URL's credentials (user info, key in the path, key in the query)
// are sent to the node — Basic authorization, the URL's path and query —
// and appear nowhere the pool prints: Status, errors, logs, metric labels.
func TestPool_NodeURLSecrets_SentButNeverPrinted(t *testing.T) {
	t.Parallel()
	c := newChain(t, 1337)
	f := newFront(t, c.url)
	const pw, pathKey, queryKey = "s3cr3tpassw0rd", "0123456789abcdefKEY", "querysecret123"
	live := "http://user:" + pw + "@" + f.addr + "/v3/" + pathKey + "?apikey=" + queryKey
	dead := "http://user:" + pw + "@127.0.0.1:" + strconv.Itoa(freePort(t)) + "/v3/" + pathKey + "?apikey=" + queryKey
	var logs logBuffer
	cfg := testConfig(t)
	cfg.Logger = slogTo(&logs)
	p := newPool(t, []string{dead, live}, cfg)
	require.NoError(t, p.Check(context.Background()))
	client, err := p.Client(context.Background())
	require.NoError(t, err)
	defer client.Close()
	reads(t, c, client)

	f.mu.Lock()
	require.Equal(t, "Basic "+base64.StdEncoding.EncodeToString([]byte("user:"+pw)), f.auth)
	require.Equal(t, "/v3/"+pathKey+"?apikey="+queryKey, f.path)
	f.mu.Unlock()

	status, err := json.Marshal(p.Status())
	require.NoError(t, err)
	mfs, err := p.Gatherer().Gather()
	require.NoError(t, err)
	var labels strings.Builder
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				labels.WriteString(l.GetValue() + "\n")
			}
		}
	}
	require.Contains(t, string(status), "connection refused", "the dead node's error is shown")
	require.Contains(t, labels.String(), nodes.RedactURL(live))
	for _, printed := range []string{string(status), logs.String(), labels.String()} {
		for _, secret := range []string{pw, pathKey, queryKey} {
			require.NotContains(t, printed, secret)
		}
	}
}
