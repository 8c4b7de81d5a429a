package mhp_test

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoMergeConflictMarkers: no text file of the module keeps a merge
// conflict's markers (one landed in the README once, unnoticed).
func TestNoMergeConflictMarkers(t *testing.T) {
	exts := map[string]bool{".go": true, ".md": true, ".yaml": true, ".yml": true, ".py": true, ".js": true, ".html": true, ".css": true, ".txtar": true, ".json": true}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != "." && (strings.HasPrefix(name, ".") || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !exts[filepath.Ext(path)] {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
		for n := 1; sc.Scan(); n++ {
			if l := sc.Text(); strings.HasPrefix(l, "<<<<<<< ") || strings.HasPrefix(l, ">>>>>>> ") {
				t.Errorf("%s:%d: a merge conflict marker: %q", path, n, l)
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
}
