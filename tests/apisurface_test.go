package tests

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// maxRootExports bounds what the root package exports (issue 32): the
// primitives' constructors, the locks, their options and errors, the
// Runtime. Machinery and secondary surfaces live in packages of their own
// (actorkit, observe, primitive, remoting); a new export here needs a
// reason to be in the root.
const maxRootExports = 90

// exportedDecls lists the exported identifiers a package's non-test files
// declare, by go/ast, as "funcs", "methods" (of exported types), "types",
// "vars" and "consts".
func exportedDecls(t *testing.T, dir string) map[string][]string {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	require.NoError(t, err)
	out := map[string][]string{}
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					if !d.Name.IsExported() {
						continue
					}
					if d.Recv == nil {
						out["funcs"] = append(out["funcs"], d.Name.Name)
						continue
					}
					typ := d.Recv.List[0].Type
					if s, ok := typ.(*ast.StarExpr); ok {
						typ = s.X
					}
					if id, ok := typ.(*ast.Ident); ok && id.IsExported() {
						out["methods"] = append(out["methods"], id.Name+"."+d.Name.Name)
					}
				case *ast.GenDecl:
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							if s.Name.IsExported() {
								out["types"] = append(out["types"], s.Name.Name)
							}
						case *ast.ValueSpec:
							kind := "vars"
							if d.Tok == token.CONST {
								kind = "consts"
							}
							for _, n := range s.Names {
								if n.IsExported() {
									out[kind] = append(out[kind], n.Name)
								}
							}
						}
					}
				}
			}
		}
	}
	for _, v := range out {
		sort.Strings(v)
	}
	return out
}

func TestRootPackageExportsAtMost90Identifiers(t *testing.T) {
	t.Parallel()
	decls := exportedDecls(t, "..")
	total := 0
	for _, kind := range []string{"funcs", "methods", "types", "vars", "consts"} {
		total += len(decls[kind])
		t.Logf("%s %d: %s", kind, len(decls[kind]), strings.Join(decls[kind], " "))
	}
	t.Logf("total %d", total)
	assert.LessOrEqual(t, total, maxRootExports, "the root package's exported identifiers")
	// What only actors need is in package actorkit, not beside the locks.
	for _, machinery := range []string{"KeeperProps", "Keep", "Unkeep", "NewOwnerToken", "DefaultRemoteName", "Runtime.PID", "Runtime.NamedPID", "Runtime.TokenOwner", "Runtime.ActorSystem"} {
		for _, kind := range []string{"funcs", "methods", "types", "consts"} {
			assert.NotContains(t, decls[kind], machinery, "the root exports %s", machinery)
		}
	}
}
