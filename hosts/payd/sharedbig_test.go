package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// go-ethereum's shared *big.Int values (common.Big1, params.Ether, …) are
// variables: a method that sets its receiver, called on one, changes it
// for every user in the process — go-ethereum's own arithmetic included.
// Three tests did (common.Big1.SetUint64(n) for block hashes), which the
// race detector reported only when two of them ran at once. No file of
// the module may call a setting method on such a value.
func TestNoCodeMutatesGoEthereumsSharedBigInts(t *testing.T) {
	shared := map[string]bool{"common": true, "params": true, "math": true, "abi": true}
	setting := map[string]bool{"Set": true, "SetInt64": true, "SetUint64": true, "SetBytes": true, "SetString": true,
		"SetBit": true, "Add": true, "Sub": true, "Mul": true, "Quo": true, "Rem": true, "Div": true, "Mod": true,
		"QuoRem": true, "DivMod": true, "Exp": true, "Lsh": true, "Rsh": true, "Neg": true, "Abs": true, "And": true,
		"Or": true, "Xor": true, "Not": true, "AndNot": true, "Sqrt": true, "ModInverse": true, "ModSqrt": true,
		"GCD": true, "Binomial": true, "MulRange": true, "Rand": true, "UnmarshalText": true, "UnmarshalJSON": true,
		"GobDecode": true, "Scan": true}
	var found []string
	fset := token.NewFileSet()
	require.NoError(t, filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata") && path != "../.." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			method, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || !setting[method.Sel.Name] {
				return true
			}
			recv, ok := method.X.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			pkg, ok := recv.X.(*ast.Ident)
			if ok && shared[pkg.Name] && ast.IsExported(recv.Sel.Name) {
				found = append(found, fset.Position(call.Pos()).String()+": "+pkg.Name+"."+recv.Sel.Name+"."+method.Sel.Name)
			}
			return true
		})
		return nil
	}))
	require.Empty(t, found, "use new(big.Int).… instead")
}
