package mhp_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
)

// TestWithAtLeaveReceiver: With and At return refined copies; the receiver
// (which a binding may share across every refusal) keeps its data and time.
func TestWithAtLeaveReceiver(t *testing.T) {
	for _, tc := range []struct {
		name string
		data map[string]any
	}{
		{"nil data", nil},
		{"some data", map[string]any{"gate": "limits"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			orig := &mhp.Error{Code: mhp.CodeLimitViolation, Message: "too hot", Data: maps.Clone(tc.data), TS: 1}
			before := maps.Clone(orig.Data)

			w := orig.With("max", 105.0)
			if w == orig {
				t.Fatal("With returned its receiver")
			}
			if w.Data["max"] != 105.0 || w.Code != orig.Code || w.Message != orig.Message || w.TS != orig.TS {
				t.Errorf("With: got %+v, want the receiver plus max=105", w)
			}
			for k, v := range before {
				if w.Data[k] != v {
					t.Errorf("With dropped data[%s]=%v", k, v)
				}
			}
			w.Data["extra"] = true // the copy's map is its own
			if !maps.Equal(orig.Data, before) || (before == nil) != (orig.Data == nil) {
				t.Errorf("With changed the receiver's data: %v, want %v", orig.Data, before)
			}

			at := time.Unix(1700000000, 500_000_000)
			a := orig.At(at)
			if a == orig || a.TS != mhp.UnixSeconds(at) || orig.TS != 1 {
				t.Errorf("At: copy TS %v (want %v), receiver TS %v (want 1)", a.TS, mhp.UnixSeconds(at), orig.TS)
			}
			if (a.Data == nil) != (orig.Data == nil) || !maps.Equal(a.Data, orig.Data) {
				t.Errorf("At changed the data: %v, want %v", a.Data, orig.Data)
			}
			if a.Data != nil {
				a.Data["extra"] = true
				if _, ok := orig.Data["extra"]; ok {
					t.Error("At's copy shares the receiver's data map")
				}
			}
		})
	}
}

// TestNoIgnoredWith fails on any statement that calls .With(k, v) or .At(t)
// and drops the result: since With and At no longer modify their receiver,
// such a call does nothing. (go vet's unusedresult checks only functions and
// String-like methods, so the module's sources are scanned here.)
func TestNoIgnoredWith(t *testing.T) {
	fset := token.NewFileSet()
	var found []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != "." && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			stmt, ok := n.(*ast.ExprStmt)
			if !ok {
				return true
			}
			call, ok := ast.Unparen(stmt.X).(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if ok && ((sel.Sel.Name == "With" && len(call.Args) == 2) || (sel.Sel.Name == "At" && len(call.Args) == 1)) {
				found = append(found, fset.Position(call.Pos()).String())
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range found {
		t.Errorf("%s: the result of With/At is dropped (they return a copy; assign it: e = e.With(k, v))", at)
	}
}

// TestChecksReturnUntypedNil: a value that passes leaves a nil error
// interface, not a nil *Error inside one (the typed-nil trap), and a
// refusal is an *Error.
func TestChecksReturnUntypedNil(t *testing.T) {
	shape := &mhp.Shape{Type: mhp.TypeNumber, Limits: mhp.Range(0, 10)}
	params := mhp.Params{{Name: "n", Shape: shape}}
	for _, tc := range []struct {
		name  string
		check func() error
		ok    bool
	}{
		{"shape ok", func() error { _, err := shape.Check("n", 1.0); return err }, true},
		{"shape refused", func() error { _, err := shape.Check("n", 11.0); return err }, false},
		{"params ok", func() error { _, err := params.Check("a", map[string]any{"n": 1.0}); return err }, true},
		{"params refused", func() error { _, err := params.Check("a", map[string]any{"m": 1.0}); return err }, false},
	} {
		err := tc.check()
		if tc.ok && err != nil {
			t.Errorf("%s: err = %#v, want a nil interface", tc.name, err)
		}
		if _, isErr := mhp.AsError(err); !tc.ok && !isErr {
			t.Errorf("%s: err = %#v, want an *mhp.Error", tc.name, err)
		}
	}
}
