package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/hdwallet"
	"github.com/evmpay/evmpay/hdwallet/awskms/kmstest"
	"github.com/evmpay/evmpay/hdwallet/pkcs11key/softhsmtest"
	"github.com/evmpay/evmpay/store/postgres/pgtest"
)

// keysSetup is a key provider made ready for payd: its environment and
// the keys created in it with `payd keys create`.
type keysSetup struct {
	provider  string
	env       []string
	funder    common.Address
	wallet    common.Address
	secretDir string
	// plaintexts are the secrets' values, which must be on no disk.
	plaintexts []string
}

// paydCmd runs a payd command to its end and returns its output.
func paydCmd(t *testing.T, env []string, stdin string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(paydBinary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

var (
	keyIDRe   = regexp.MustCompile(`key_id=(\S+)`)
	addressRe = regexp.MustCompile(`address=(0x[0-9a-fA-F]{40})`)
)

// setupKeys creates the wrapping key, the sweep wallet's and the gas
// funder's signing keys in the provider with payd's own commands, and
// seals the mnemonic, PAY_SECRET_KEY and the admin token from standard
// input: no plaintext secret is ever written to disk.
func setupKeys(t *testing.T, provider string, providerEnv []string) keysSetup {
	t.Helper()
	k := keysSetup{provider: provider, env: append([]string{"PAY_KEYS_PROVIDER=" + provider}, providerEnv...), secretDir: t.TempDir()}
	create := func(kind, label string) (id string, addr common.Address) {
		out, err := paydCmd(t, k.env, "", "keys", "create", "--kind", kind, "--label", label)
		require.NoError(t, err, "%s", out)
		m := keyIDRe.FindStringSubmatch(out)
		require.NotNil(t, m, "%s", out)
		if a := addressRe.FindStringSubmatch(out); a != nil {
			addr = common.HexToAddress(a[1])
		}
		return m[1], addr
	}
	sealID, _ := create("wrap", "evmpay-seal")
	walletID, wallet := create("signing", "evmpay-sweep-wallet")
	funderID, funder := create("signing", "evmpay-gas-funder")
	k.wallet, k.funder = wallet, funder
	k.env = append(k.env, "PAY_SEAL_KEY="+sealID, "SWEEP_WALLET_KEY="+walletID, "GAS_FUNDER_KEY="+funderID)

	m, err := hdwallet.GenerateMnemonic(24)
	require.NoError(t, err)
	secrets := map[string]string{
		secretMnemonic: m.Phrase(),
		secretKey:      fmt.Sprintf("%x", crypto.Keccak256([]byte(t.Name()))),
		secretAdmin:    "operator-token-for-keys-tests",
	}
	for name, v := range secrets {
		path := filepath.Join(k.secretDir, strings.ToLower(name)+".sealed")
		out, err := paydCmd(t, k.env, v+"\n", "secrets", "seal", name, "--out", path)
		require.NoError(t, err, "%s", out)
		require.Contains(t, out, name+" sealed by "+provider)
		k.env = append(k.env, name+"_FILE="+path)
		k.plaintexts = append(k.plaintexts, v)
	}
	return k
}

// assertNoPlaintextOnDisk: no file under the directories payd and the
// test used holds a secret's value.
func (k keysSetup) assertNoPlaintextOnDisk(t *testing.T, dirs ...string) {
	t.Helper()
	for _, dir := range append(dirs, k.secretDir) {
		require.NoError(t, filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return nil // sockets, vanished files
			}
			for _, v := range k.plaintexts {
				require.NotContains(t, string(b), v, "plaintext secret in %s", path)
			}
			return nil
		}))
	}
}

// serveWithKeys starts the dev chain (funding only the gas funder: the
// sweep wallet in the HSM or KMS starts empty and is topped up) and one
// `payd serve` of every role, and returns the API's and the chain's
// addresses and the process.
func serveWithKeys(t *testing.T, k keysSetup) (apiAddr, chainAddr string, env []string, p *process) {
	t.Helper()
	chainAddr = freeAddr(t)
	startProcess(t, "devchain", nil, "devchain", "--chain-rpc", chainAddr, "--fund", k.funder.Hex())
	waitRPC(t, "http://"+chainAddr)
	env = append([]string{"DATABASE_URL=" + pgtest.URL(t), "RPC_URL=http://" + chainAddr, "CHAIN_ID=1337",
		"WEBHOOK_ALLOW_PRIVATE_NETWORKS=true"}, k.env...)
	apiAddr = freeAddr(t)
	p = startProcess(t, "serve-"+k.provider, env, "serve", "--roles", "all", "--http", apiAddr,
		"--rpc-proxy", freeAddr(t), "--metrics", "")
	waitHTTP(t, "http://"+apiAddr+"/readyz", 90*time.Second)
	return apiAddr, chainAddr, env, p
}

// keysFlow is the done-when of docs/keys.md for one provider: payd serve
// runs invoice → payment → sweep with a top-up → webhooks with the sweep
// wallet's and the gas funder's keys in the provider and the mnemonic
// sealed, and reports where every secret lives.
func keysFlow(t *testing.T, k keysSetup) (api apiClient, apiAddr, chainAddr string, p *process) {
	t.Helper()
	ctx := context.Background()
	apiAddr, chainAddr, env, p := serveWithKeys(t, k)

	// The start-up log names the provider of every secret, and no
	// plaintext file is warned about.
	log := p.out.String()
	for _, name := range []string{secretMnemonic, secretKey, secretAdmin, keySweepWallet, keyGasFunder} {
		require.Regexp(t, `msg=secret name=`+name+` provider=`+k.provider, log)
	}
	require.NotContains(t, log, "plaintext secret file")

	recv := newReceiver(t)
	// The HSM or KMS keys are service addresses: refused as a settlement
	// address.
	out, err := paydCmd(t, env, "", "merchants", "create", "--settlement-address", k.funder.Hex())
	require.Error(t, err, "%s", out)
	require.Contains(t, out, "settlement_address_reserved")
	settle, err := crypto.GenerateKey()
	require.NoError(t, err)
	out, err = paydCmd(t, env, "", "merchants", "create", "--webhook-url", recv.srv.URL+"/hooks",
		"--settlement-address", crypto.PubkeyToAddress(settle.PublicKey).Hex(), "--name", "shop")
	require.NoError(t, err, "%s", out)
	key := regexp.MustCompile(`api_key=(\S+)`).FindStringSubmatch(out)
	secret := regexp.MustCompile(`webhook_secret=(\S+)`).FindStringSubmatch(out)
	require.NotNil(t, key, "%s", out)
	require.NotNil(t, secret, "%s", out)
	recv.setSecret(secret[1])

	api = apiClient{t: t, base: "http://" + apiAddr, key: key[1]}
	payFlow(t, ctx, api, chainAddr, recv)

	// The top-up and the funding were signed in the token or KMS and mined
	// on the dev chain.
	eth, err := ethclient.DialContext(ctx, "http://"+chainAddr)
	require.NoError(t, err)
	defer eth.Close()
	for _, a := range []common.Address{k.funder, k.wallet} {
		n, err := eth.NonceAt(ctx, a, nil)
		require.NoError(t, err)
		require.Positive(t, n, "%s sent transactions", a.Hex())
	}

	op := apiClient{t: t, base: "http://" + apiAddr, key: "operator-token-for-keys-tests"}
	code, status := op.do("GET", "/v1/admin/status", nil, nil)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, true, status["healthy"], "%v", status)
	sources := map[string]map[string]any{}
	for _, s := range status["secrets"].([]any) {
		m := s.(map[string]any)
		sources[m["name"].(string)] = m
	}
	for _, name := range []string{secretMnemonic, secretKey, secretAdmin} {
		require.Equal(t, k.provider, sources[name]["provider"], "%s: %v", name, sources[name])
		require.Equal(t, true, sources[name]["sealed"])
		require.Nil(t, sources[name]["warning"])
	}
	require.Equal(t, k.wallet.Hex(), sources[keySweepWallet]["address"])
	require.Equal(t, k.funder.Hex(), sources[keyGasFunder]["address"])
	require.Equal(t, k.provider, sources[keyGasFunder]["provider"])
	require.Equal(t, k.wallet.Hex(), status["sweep_wallet"].(map[string]any)["address"])

	var ready map[string]string
	require.NoError(t, json.Unmarshal([]byte(httpGet(t, "http://"+apiAddr+"/readyz", "")), &ready))
	require.Equal(t, "ok", ready["keys"])
	return api, apiAddr, chainAddr, p
}

func TestServe_KeysInSoftHSM(t *testing.T) {
	t.Parallel()
	tok := softhsmtest.New(t)
	pinFile := filepath.Join(t.TempDir(), "pin")
	require.NoError(t, os.WriteFile(pinFile, []byte(tok.PIN), 0o600))
	providerEnv := append(tok.Env(), "PAY_PKCS11_MODULE="+tok.Module, "PAY_PKCS11_TOKEN="+tok.Label, "PAY_PKCS11_PIN_FILE="+pinFile)

	// A wrong PIN stops payd at start, naming the token, never the PIN.
	wrongPIN := filepath.Join(t.TempDir(), "wrong-pin")
	require.NoError(t, os.WriteFile(wrongPIN, []byte("00000000"), 0o600))
	out, err := paydCmd(t, append(append([]string{"DATABASE_URL=" + pgtest.URL(t), "RPC_URL=http://127.0.0.1:1"}, providerEnv...),
		"PAY_KEYS_PROVIDER=pkcs11", "PAY_PKCS11_PIN_FILE="+wrongPIN), "", "serve", "--roles", "sweep", "--http", "127.0.0.1:0", "--metrics", "")
	require.Error(t, err)
	require.Contains(t, out, "CKR_PIN_INCORRECT")
	require.Contains(t, out, tok.Label)
	require.NotContains(t, out, "00000000")

	k := setupKeys(t, "pkcs11", providerEnv)
	keysFlow(t, k)
	k.assertNoPlaintextOnDisk(t, filepath.Dir(tok.Conf))
}

func TestServe_KeysInKMS(t *testing.T) {
	t.Parallel()
	kmsEmu := kmstest.Start(t)
	k := setupKeys(t, "awskms", kmsEmu.Env())
	api, apiAddr, chainAddr, p := keysFlow(t, k)
	k.assertNoPlaintextOnDisk(t, kmsEmu.DataDir)

	// KMS goes away mid-run: the sweep role says why on /readyz and the
	// next sweep waits — nothing signed, nothing half-sent — until KMS is
	// back, then completes.
	kmsEmu.Stop()
	readyz := ""
	waitUntil(t, 60*time.Second, 250*time.Millisecond, func() bool {
		readyz = httpGet(t, "http://"+apiAddr+"/readyz", "")
		// Each key is checked on its own: both are named once both
		// checks ran since KMS went away.
		return strings.Contains(readyz, keySweepWallet+": awskms: KMS unavailable") &&
			strings.Contains(readyz, keyGasFunder+": awskms: KMS unavailable")
	}, func() string { return "readyz never named both unreachable keys: " + readyz })

	ctx := context.Background()
	code, inv := api.do("POST", "/v1/invoices", map[string]any{"amount_wei": "250000000000000000", "order_id": "kms-down"},
		map[string]string{"Idempotency-Key": "kms-down"})
	require.Equal(t, http.StatusCreated, code, "%v", inv)
	id := int64(inv["id"].(float64))
	var payOut strings.Builder
	require.NoError(t, run(ctx, []string{"pay", "--rpc", chainAddr, inv["payment_uri"].(string)}, &payOut))
	eth, err := ethclient.DialContext(ctx, "http://"+chainAddr)
	require.NoError(t, err)
	defer eth.Close()
	walletNonce, err := eth.NonceAt(ctx, k.wallet, nil)
	require.NoError(t, err)
	var got map[string]any
	waitUntil(t, 120*time.Second, 250*time.Millisecond, func() bool {
		_, got = api.do("GET", fmt.Sprintf("/v1/invoices/%d", id), nil, nil)
		return got["status"] == "CONFIRMED"
	}, func() string { return fmt.Sprintf("never CONFIRMED: %v", got) })
	// The sweep's next pass tries to sign the funding and cannot: what it
	// left behind is checked once it has tried.
	tried := regexp.MustCompile(fmt.Sprintf(`msg="sweep: transient error" component=sweep invoice_id=%d error="sign FUNDING: awskms: KMS unavailable`, id))
	waitUntil(t, 120*time.Second, 250*time.Millisecond, func() bool { return tried.MatchString(p.out.String()) },
		func() string {
			return "the sweep never tried to sign the funding while KMS was down:\n" + p.out.String()
		})
	_, got = api.do("GET", fmt.Sprintf("/v1/invoices/%d", id), nil, nil)
	require.Equal(t, "QUEUED", got["sweep_status"], "no funding was signed or stored while KMS was down: %v", got)
	pending, err := eth.PendingNonceAt(ctx, k.wallet)
	require.NoError(t, err)
	require.Equal(t, walletNonce, pending, "nothing sent from the sweep wallet")

	kmsEmu.Restart()
	waitUntil(t, 120*time.Second, 250*time.Millisecond, func() bool {
		_, got = api.do("GET", fmt.Sprintf("/v1/invoices/%d", id), nil, nil)
		return got["status"] == "SETTLED"
	}, func() string { return fmt.Sprintf("never SETTLED after KMS came back: %v", got) })
	waitHTTP(t, "http://"+apiAddr+"/readyz", 30*time.Second)

	// KMS unreachable at start: a clear error, no start.
	kmsEmu.Stop()
	env := append([]string{"DATABASE_URL=" + pgtest.URL(t), "RPC_URL=http://" + chainAddr, "CHAIN_ID=1337"}, k.env...)
	out, err := paydCmd(t, env, "", "serve", "--roles", "sweep", "--http", "127.0.0.1:0", "--metrics", "")
	require.Error(t, err, "%s", out)
	require.Contains(t, out, "KMS unavailable")
	require.Regexp(t, keySweepWallet+`|`+secretMnemonic+`|`+secretAdmin, out)
	for _, v := range k.plaintexts {
		require.NotContains(t, out, v)
	}
}
