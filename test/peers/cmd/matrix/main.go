// Command matrix writes the conformance matrix of the recorded agent
// releases: for every release under test/peers/testdata and every rule, what
// a client gets from the agent directly and through the proxy, judged by the
// conformance checker and reducer. It writes docs/matrix.md and
// docs/matrix.html (`go run ./test/peers/cmd/matrix` from the repository
// root); matrix_test.go fails when the checked-in files are stale.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	root := flag.String("root", ".", "the repository root")
	flag.Parse()
	m, err := Build(filepath.Join(*root, "test/peers/testdata"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "matrix:", err)
		os.Exit(1)
	}
	for name, body := range map[string]string{"docs/matrix.md": m.Markdown(), "docs/matrix.html": m.HTML()} {
		if err := os.WriteFile(filepath.Join(*root, name), []byte(body), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "matrix:", err)
			os.Exit(1)
		}
	}
}
