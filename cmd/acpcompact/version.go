package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
)

// version is the release this binary was built as, stamped by `make dist`
// (-ldflags "-X main.version=v0.1.0", from the repository's VERSION file).
// Empty in any other build: see buildVersion.
var version string

const versionUsage = `usage: acpcompact version

Prints the version of this acpcompact binary: the release the npm
packages were built as (make dist), else the module version Go recorded
(go install github.com/acpcompact/acpcompact/cmd/acpcompact@v0.1.0), else
"(devel)".
`

// runVersion implements "acpcompact version"; args exclude the subcommand
// name.
func runVersion(_ context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, versionUsage) }
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "acpcompact version: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	fmt.Fprintf(stdout, "acpcompact %s\n", buildVersion(version, debug.ReadBuildInfo))
	return 0
}

// buildVersion is the stamped version if there is one, else the main
// module's version from the build information (set by go install
// …@vX, or a VCS pseudo-version for a build in a checkout), else
// "(devel)". The reader is a parameter so that tests can play each case.
func buildVersion(stamped string, read func() (*debug.BuildInfo, bool)) string {
	if stamped != "" {
		return stamped
	}
	if bi, ok := read(); ok && bi.Main.Version != "" {
		return bi.Main.Version // "(devel)" itself when Go knew no version
	}
	return "(devel)"
}
