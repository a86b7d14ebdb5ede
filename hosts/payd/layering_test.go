package main

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/evmpay/evmpay/"

// goList runs go list on the whole module and returns each package's import
// path (module-relative) and its imports within the module (non-test).
func goList(t *testing.T, args ...string) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-json=ImportPath,Imports"}, args...)...)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	var stderr string
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = string(ee.Stderr)
	}
	require.NoError(t, err, "go list: %s", stderr)
	pkgs := map[string][]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct {
			ImportPath string
			Imports    []string
		}
		require.NoError(t, dec.Decode(&p))
		var own []string
		for _, i := range p.Imports {
			if rest, ok := strings.CutPrefix(i, module); ok {
				own = append(own, rest)
			}
		}
		pkgs[strings.TrimPrefix(p.ImportPath, module)] = own
	}
	return pkgs
}

// top is a package's top-level folder.
func top(pkg string) string { return strings.SplitN(pkg, "/", 2)[0] }

// TestLayering checks, on the module's own (non-test) imports, the layers
// docs/architecture.md states:
//
//   - the ground floor, store and its subpackages, imports nothing above it;
//   - hdwallet imports only the ground floor and itself;
//   - a concern package (invoice, settlement, sweep, webhook, indexer,
//     rpcproxy) imports the ground floor, hdwallet and its own subpackages,
//     never a sibling concern;
//   - nothing outside hosts/ and examples/ imports hosts/ (programs and the
//     test kit sit on top);
//   - no library package is a program.
func TestLayering(t *testing.T) {
	t.Parallel()
	pkgs := goList(t, "./...")
	concerns := map[string]bool{"invoice": true, "settlement": true, "sweep": true, "webhook": true, "indexer": true, "rpcproxy": true}
	require.Contains(t, pkgs, "store", "the module's packages are listed")
	require.Contains(t, pkgs["settlement"], "store")
	for pkg, imports := range pkgs {
		layer := top(pkg)
		for _, imp := range imports {
			to := top(imp)
			switch {
			case to == "hosts" || to == "examples":
				require.Contains(t, []string{"hosts", "examples"}, layer, "%s imports %s: only programs and the test kit import hosts/", pkg, imp)
			case layer == "store":
				require.Equal(t, "store", to, "%s imports %s: the ground floor imports nothing above it", pkg, imp)
			case layer == "hdwallet":
				require.Contains(t, []string{"store", "hdwallet"}, to, "%s imports %s", pkg, imp)
			case concerns[layer]:
				require.True(t, to == "store" || to == "hdwallet" || to == layer,
					"%s imports %s: a concern package never imports a sibling (they meet in the store)", pkg, imp)
			}
		}
	}
	out, err := exec.Command("go", "list", "-f", "{{if eq .Name \"main\"}}{{.ImportPath}}{{end}}", "../../...").Output()
	require.NoError(t, err)
	for _, p := range strings.Fields(string(out)) {
		l := top(strings.TrimPrefix(p, module))
		require.Contains(t, []string{"hosts", "examples"}, l, "%s is a program: programs live under hosts/ or examples/", p)
	}
}

// The production binary (-tags nodev) holds no dev chain: none of
// go-ethereum's in-process node (p2p stack, database, simulated backend),
// no test tokens, and none of the test-only tools (browser driver, OpenAPI
// validator, QR decoder).
func TestLayering_ProductionPaydHasNoDevChainOrTestTools(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("go", "list", "-tags", "nodev", "-deps", "-f", "{{.ImportPath}}", "./hosts/payd")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	require.NoError(t, err)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/ethereum/go-ethereum/ethclient", "the list is payd's")
	// An entry ending in "/" is a tree of packages, others one package.
	for _, forbidden := range []string{
		"github.com/ethereum/go-ethereum/ethclient/simulated", "github.com/ethereum/go-ethereum/node",
		"github.com/ethereum/go-ethereum/p2p", "github.com/ethereum/go-ethereum/p2p/discover",
		"github.com/ethereum/go-ethereum/eth", "github.com/cockroachdb/pebble", "github.com/pion/",
		module + "hosts/evmpaytest/", "github.com/chromedp/", "github.com/pb33f/libopenapi-validator",
		"github.com/makiuchi-d/gozxing",
	} {
		for _, d := range deps {
			hit := d == forbidden || strings.HasSuffix(forbidden, "/") && strings.HasPrefix(d, forbidden)
			require.False(t, hit, "the production payd depends on %s", d)
		}
	}
}

// An embedder's build never needs the tools only the module's own tests use
// (the browser driver, the OpenAPI validator, the QR decoder): no library
// package depends on them, so a build that imports the library downloads
// none of their code (checked by hand with a fresh GOMODCACHE:
// docs/architecture.md).
func TestLayering_LibraryNeedsNoTestTools(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}",
		"./store/...", "./hdwallet/...", "./invoice/...", "./settlement/...", "./sweep/...", "./webhook/...",
		"./indexer/...", "./rpcproxy/...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	require.NoError(t, err)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, module+"invoice")
	for _, d := range deps {
		for _, tool := range []string{"github.com/chromedp/", "github.com/pb33f/", "github.com/makiuchi-d/gozxing"} {
			require.False(t, strings.HasPrefix(d, tool), "a library package depends on the test tool %s", d)
		}
	}
}
