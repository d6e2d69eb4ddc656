package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
)

type tables struct {
	s  [8][64]byte
	p  [32]byte
	ip [64]byte
}

// readTables takes desS, desP and desIP from the package's own source, so that
// the tables exist once.
func readTables(path string) (tables, error) {
	var t tables
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		return t, err
	}
	found := 0
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || len(vs.Values) != 1 {
			return true
		}
		var dst []*byte
		switch vs.Names[0].Name {
		case "desS":
			for i := range t.s {
				for j := range t.s[i] {
					dst = append(dst, &t.s[i][j])
				}
			}
		case "desP":
			for i := range t.p {
				dst = append(dst, &t.p[i])
			}
		case "desIP":
			for i := range t.ip {
				dst = append(dst, &t.ip[i])
			}
		default:
			return true
		}
		var vals []byte
		var walk func(e ast.Expr)
		walk = func(e ast.Expr) {
			switch e := e.(type) {
			case *ast.CompositeLit:
				for _, x := range e.Elts {
					walk(x)
				}
			case *ast.BasicLit:
				v, _ := strconv.Atoi(e.Value)
				vals = append(vals, byte(v))
			}
		}
		walk(vs.Values[0])
		if len(vals) != len(dst) {
			err = fmt.Errorf("%s: %s has %d values, want %d", path, vs.Names[0].Name, len(vals), len(dst))
			return false
		}
		for i, v := range vals {
			*dst[i] = v
		}
		found++
		return true
	})
	if err == nil && found != 3 {
		err = fmt.Errorf("%s: desS, desP and desIP not all found", path)
	}
	return t, err
}
