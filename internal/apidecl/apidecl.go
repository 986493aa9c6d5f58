// Package apidecl lists what a package's sources export, by go/ast: for the
// tests that bound the root package's surface and that call every method
// of the handles on nil receivers.
package apidecl

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Decls are the exported identifiers of a package's non-test files:
// "funcs", "methods" (as "Type.Method", of exported types), "types",
// "vars" and "consts", each sorted.
type Decls map[string][]string

// Kinds are Decls' keys, in the order they are told.
var Kinds = []string{"funcs", "methods", "types", "vars", "consts"}

// Total is how many identifiers d holds.
func (d Decls) Total() int {
	n := 0
	for _, k := range Kinds {
		n += len(d[k])
	}
	return n
}

// TypesWithMethods are the exported types that have exported methods.
func (d Decls) TypesWithMethods() []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range d["methods"] {
		typ, _, _ := strings.Cut(m, ".")
		if !seen[typ] {
			seen[typ] = true
			out = append(out, typ)
		}
	}
	sort.Strings(out)
	return out
}

// Exported reads the non-test .go files of dir.
func Exported(dir string) (Decls, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	d := Decls{}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, decl := range f.Decls {
			add(d, decl)
		}
	}
	for _, v := range d {
		sort.Strings(v)
	}
	return d, nil
}

func add(d Decls, decl ast.Decl) {
	switch decl := decl.(type) {
	case *ast.FuncDecl:
		if !decl.Name.IsExported() {
			return
		}
		if decl.Recv == nil {
			d["funcs"] = append(d["funcs"], decl.Name.Name)
			return
		}
		typ := decl.Recv.List[0].Type
		if s, ok := typ.(*ast.StarExpr); ok {
			typ = s.X
		}
		if id, ok := typ.(*ast.Ident); ok && id.IsExported() {
			d["methods"] = append(d["methods"], id.Name+"."+decl.Name.Name)
		}
	case *ast.GenDecl:
		for _, s := range decl.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				if s.Name.IsExported() {
					d["types"] = append(d["types"], s.Name.Name)
				}
			case *ast.ValueSpec:
				kind := "vars"
				if decl.Tok == token.CONST {
					kind = "consts"
				}
				for _, n := range s.Names {
					if n.IsExported() {
						d[kind] = append(d[kind], n.Name)
					}
				}
			}
		}
	}
}
