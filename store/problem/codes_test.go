package problem_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/evmpay/evmpay/store/problem"
)

// The one error table is complete both ways, checked on the module's
// source: every code of the table is answered somewhere (a problem.Code…
// constant used outside this package's own files), and nothing answers
// with a code outside it (the code argument of Of, OfField and Reply is
// always a constant of the table, never a string literal). With the
// OpenAPI documents' Problem.code enum generated from the table
// (httpapi.WithProblem), what the documents name is what is produced.
func TestCodes_EveryCodeProducedAndNothingOutsideTheTable(t *testing.T) {
	used := map[string]bool{}
	fset := token.NewFileSet()
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == ".tools" || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") ||
			filepath.Dir(path) == "." {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.Ident); ok && x.Name == "problem" && strings.HasPrefix(n.Sel.Name, "Code") {
					used[n.Sel.Name] = true
				}
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok || len(n.Args) == 0 {
					return true
				}
				x, ok := sel.X.(*ast.Ident)
				if !ok || x.Name != "problem" {
					return true
				}
				arg := 0
				switch sel.Sel.Name {
				case "Of", "OfField":
				case "Reply":
					arg = 1
				default:
					return true
				}
				if lit, ok := n.Args[arg].(*ast.BasicLit); ok {
					code, _ := strconv.Unquote(lit.Value)
					t.Errorf("%s: problem.%s(%q, …): use a code constant of the table", fset.Position(n.Pos()), sel.Sel.Name, code)
				}
			}
			return true
		})
		return nil
	})
	require.NoError(t, err)

	// The table's constants, from its source.
	f, err := parser.ParseFile(fset, "codes.go", nil, 0)
	require.NoError(t, err)
	var constants []string
	for _, d := range f.Decls {
		if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.CONST {
			for _, s := range g.Specs {
				for _, n := range s.(*ast.ValueSpec).Names {
					constants = append(constants, n.Name)
				}
			}
		}
	}
	require.Len(t, constants, len(problem.Codes()), "a constant for every code in the table")
	for _, c := range constants {
		require.True(t, used[c], "problem.%s is in the table but nothing answers with it", c)
	}
}
