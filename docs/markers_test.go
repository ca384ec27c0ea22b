package docs_test

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNoMergeConflictMarkers: a merge that left its markers in a document or
// a source file (the CHANGELOG once kept both sides of one for a day) fails
// here rather than in a reader's eyes.
func TestNoMergeConflictMarkers(t *testing.T) {
	root := ".."
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "testdata", "dist":
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".md", ".html", ".json", ".yml", ".yaml", ".mk":
		default:
			if d.Name() != "Makefile" {
				return nil
			}
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 16<<20)
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			if strings.HasPrefix(line, "<<<<<<< ") || strings.HasPrefix(line, ">>>>>>> ") || line == "=======" {
				assert.Fail(t, "merge conflict marker", "%s:%d: %q", path, n, line)
			}
		}
		checked++
		return sc.Err()
	})
	require.NoError(t, err, "walking the repository")
	require.Greater(t, checked, 100, "files checked")
}
