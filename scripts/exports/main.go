// Command exports prints, for each package folder given, its exported names (funcs, methods,
// types, consts and vars; not struct fields, not tests) and the field counts of its three largest
// struct types: the figures of issue 40's closing note. Usage: go run ./scripts/exports DIR...
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	for _, dir := range os.Args[1:] {
		fs := token.NewFileSet()
		entries, err := os.ReadDir(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "exports:", err)
			os.Exit(1)
		}
		var files []*ast.File
		for _, e := range entries {
			if n := e.Name(); strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
				f, err := parser.ParseFile(fs, filepath.Join(dir, n), nil, 0)
				if err != nil {
					fmt.Fprintln(os.Stderr, "exports:", err)
					os.Exit(1)
				}
				files = append(files, f)
			}
		}
		n := 0
		type st struct {
			name   string
			fields int
		}
		var sts []st
		for _, f := range files {
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					if d.Name.IsExported() {
						n++
					}
				case *ast.GenDecl:
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							if s.Name.IsExported() {
								n++
							}
							if t, ok := s.Type.(*ast.StructType); ok {
								c := 0
								for _, f := range t.Fields.List {
									c += max(len(f.Names), 1)
								}
								sts = append(sts, st{s.Name.Name, c})
							}
						case *ast.ValueSpec:
							for _, id := range s.Names {
								if id.IsExported() {
									n++
								}
							}
						}
					}
				}
			}
		}
		sort.Slice(sts, func(i, j int) bool { return sts[i].fields > sts[j].fields })
		if len(sts) > 3 {
			sts = sts[:3]
		}
		fmt.Printf("%-22s exported %3d  largest structs %v\n", dir, n, sts)
	}
}
