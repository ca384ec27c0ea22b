package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// dirs are the public packages' directories, from this one.
var dirs = map[string]string{"agentkit": "../..", "acpsdk": "../../acpsdk"}

// TestGeneratedFilesAreCurrent fails when a checked-in generated file is
// not what the templates produce: run `go generate ./agentkit/...`.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	for pkg, dir := range dirs {
		files, err := render(pkg)
		if err != nil {
			t.Fatal(err)
		}
		for name, want := range files {
			got, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Errorf("%s: %v (run go generate ./agentkit/...)", pkg, err)
				continue
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s/%s is stale: run go generate ./agentkit/...", pkg, name)
			}
		}
	}
}

func TestUnknownPackageIsRefused(t *testing.T) {
	if _, err := render("jsonrpc2"); err == nil {
		t.Error("render accepted an unknown package")
	}
}
