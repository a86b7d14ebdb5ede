package sweep

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files in testdata/")

// The sweep's JSON in the operator status (/v1/admin/status: the sweep
// wallet, the gas funder, retired keys) is pinned: a change is a visible
// diff of testdata/wallet_status.json (go test ./sweep -run Golden -update
// rewrites it). Every address is EIP-55.
func TestWalletStatusJSON_Golden(t *testing.T) {
	wallet := common.HexToAddress("0x8c8d35429f74ec245f8ef2f4fd1e551cff97d650")
	funder := common.HexToAddress("0xc6fe5d33615a1c52c08018c47e8bc53646a0e101")
	v := struct {
		Wallet  WalletStatus    `json:"sweep_wallet"`
		Retired []RetiredStatus `json:"retired_keys"`
	}{
		Wallet: WalletStatus{Address: wallet, Block: 215, BalanceWei: store.MustParseAmount("199861715000000000"),
			GasSpend24hWei: store.NewAmount(138_285_000), ReserveWei: store.MustParseAmount("100000000000000000"),
			Funder: &FunderStatus{Address: funder, BalanceWei: store.MustParseAmount("49799999999999979000")},
			Alerts: []string{"chain guard: the node is behind"}},
		Retired: []RetiredStatus{{Address: funder, To: wallet,
			BalanceWei: store.NewAmount(21000), Drained: true}},
	}
	got, err := json.MarshalIndent(v, "", "  ")
	require.NoError(t, err)
	got = append(got, '\n')
	path := filepath.Join("testdata", "wallet_status.json")
	if *updateGolden {
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
	require.Contains(t, string(got), wallet.Hex())
	require.NotContains(t, string(got), "0x8c8d35429f74ec245f8ef2f4fd1e551cff97d650", "EIP-55 only")
}
