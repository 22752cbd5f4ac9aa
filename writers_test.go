package eim_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// rowWriters are the packages that may call the generic writes of an
// eim.Tx: the inventory, which holds the rules of every write (the API's
// and the field-scoped operations of the modules), the store that
// implements them and its conformance suite, and the benchmark seeders,
// which fill a store directly. Tests may too (they are not checked).
var rowWriters = []string{
	"github.com/eimhq/eim/inventory",
	"github.com/eimhq/eim/sqlstore",
	"github.com/eimhq/eim/sqlstore/storetest",
	"github.com/eimhq/eim/bench/",
}

// genericWrites are the methods of eim.Tx that write rows.
var genericWrites = []string{"Create", "Update", "Delete", "UpdateFields", "UpdateFieldsIf"}

// TestOnlyTheInventoryWritesRows fails when a package other than
// rowWriters calls a generic write of eim.Tx: modules write through the
// inventory's field-scoped operations (docs/architecture.md, "Writers"),
// which validate what they write and write only their columns. Nor does
// any package but the server's wiring (cmd/) take the store from an
// inventory.Service to go past it (tests may). It
// type-checks every package of the module from source against the
// compiler's export data of its imports.
func TestOnlyTheInventoryWritesRows(t *testing.T) {
	if testing.Short() {
		t.Skip("type-checks the whole module")
	}
	type listed struct {
		ImportPath string
		Dir        string
		GoFiles    []string
		Export     string
		Module     *struct{ Path string }
		Error      *struct{ Err string }
	}
	cmd := exec.Command("go", "list", "-e", "-export", "-deps", "-json=ImportPath,Dir,GoFiles,Export,Module,Error", "./...")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	exports := map[string]string{}
	var ours []listed
	for dec := json.NewDecoder(strings.NewReader(string(out))); ; {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		if p.Error != nil {
			t.Fatalf("go list: %s: %s", p.ImportPath, p.Error.Err)
		}
		exports[p.ImportPath] = p.Export
		if p.Module != nil && p.Module.Path == "github.com/eimhq/eim" && !allowedWriter(p.ImportPath) {
			ours = append(ours, p)
		}
	}
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok || f == "" {
			return nil, errors.New("no export data for " + path)
		}
		return os.Open(f)
	})
	checked := 0
	var found []string
	for _, p := range ours {
		var files []*ast.File
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		info := &types.Info{Selections: map[*ast.SelectorExpr]*types.Selection{}}
		if _, err := (&types.Config{Importer: imp}).Check(p.ImportPath, fset, files, info); err != nil {
			t.Fatalf("type-check %s: %v", p.ImportPath, err)
		}
		checked++
		for sel, s := range info.Selections {
			fn, ok := s.Obj().(*types.Func)
			if ok && fn.FullName() == "(*github.com/eimhq/eim/inventory.Service).Store" && !strings.HasPrefix(p.ImportPath, "github.com/eimhq/eim/cmd/") {
				pos := fset.Position(sel.Sel.Pos())
				t.Errorf("%s:%d: inventory.Service.Store: only the server's wiring (cmd/) reaches past the inventory to its store", pos.Filename, pos.Line)
			}
			if !ok || !slices.Contains(genericWrites, fn.Name()) || !isTx(s.Recv()) {
				continue
			}
			pos := fset.Position(sel.Sel.Pos())
			rel, err := filepath.Rel(root, pos.Filename)
			if err != nil {
				rel = pos.Filename
			}
			found = append(found, fmt.Sprintf("%s:%d: eim.Tx.%s", filepath.ToSlash(rel), pos.Line, fn.Name()))
		}
	}
	slices.Sort(found)
	for _, f := range found {
		t.Errorf("%s: only the inventory writes rows; modules call its field-scoped operations (docs/architecture.md, \"Writers\")", f)
	}
	if checked < 10 {
		t.Fatalf("checked %d packages; the listing found too few to be the module", checked)
	}
}

func allowedWriter(path string) bool {
	for _, w := range rowWriters {
		if path == w || (strings.HasSuffix(w, "/") && strings.HasPrefix(path, w)) {
			return true
		}
	}
	return false
}

// isTx reports whether t is eim.Tx.
func isTx(t types.Type) bool {
	n, ok := types.Unalias(t).(*types.Named)
	return ok && n.Obj().Name() == "Tx" && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == "github.com/eimhq/eim"
}
