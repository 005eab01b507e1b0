// Command funclen prints the longest functions of the Go files under the given directories
// (test files left out), longest first: lines, name, file.
//
//	go run ./scripts/funclen [-n 10] gateway
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

type fn struct {
	lines int
	name  string
	file  string
}

func main() {
	n := flag.Int("n", 10, "how many functions to print")
	flag.Parse()
	var fns []fn
	fset := token.NewFileSet()
	for _, root := range flag.Args() {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			for _, d := range f.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
					lines := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
					fns = append(fns, fn{lines, name(fd), path})
				}
			}
			return nil
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "funclen:", err)
			os.Exit(1)
		}
	}
	sort.Slice(fns, func(i, j int) bool { return fns[i].lines > fns[j].lines })
	for _, f := range fns[:min(*n, len(fns))] {
		fmt.Printf("%4d %s %s\n", f.lines, f.name, f.file)
	}
}

func name(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}
