// Command kitgen writes the declarations that agentkit and agentkit/acpsdk
// share word for word: the Session type with its methods, the options, the
// cancel grace's default and the sentinel errors. Both public packages must
// show them whole in their godoc, which a type alias to an internal type
// would not (godoc lists no methods of an internal type through an alias),
// so each package gets real declarations, generated from one template
// (session.go.tmpl, options.go.tmpl).
//
// Each package runs it with go generate:
//
//	//go:generate go run <path to this directory> -pkg agentkit
//
// which writes session_gen.go and options_gen.go into the package's
// directory. TestGeneratedFilesAreCurrent fails when a checked-in file
// differs from what the templates produce.
package main

import (
	"bytes"
	"embed"
	"flag"
	"fmt"
	"go/format"
	"os"
	"path/filepath"
	"text/template"
)

//go:embed *.tmpl
var templates embed.FS

// packages are the public packages kitgen writes for.
var packages = map[string]bool{"agentkit": true, "acpsdk": true}

func main() {
	pkg := flag.String("pkg", "", "the package to generate for: agentkit or acpsdk")
	dir := flag.String("dir", ".", "the package's directory")
	flag.Parse()
	files, err := render(*pkg)
	if err == nil {
		for name, src := range files {
			if err = os.WriteFile(filepath.Join(*dir, name), src, 0o644); err != nil {
				break
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kitgen:", err)
		os.Exit(1)
	}
}

// render returns the generated files of package pkg, by name.
func render(pkg string) (map[string][]byte, error) {
	if !packages[pkg] {
		return nil, fmt.Errorf("unknown package %q (want agentkit or acpsdk)", pkg)
	}
	t, err := template.ParseFS(templates, "*.tmpl")
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, name := range []string{"session", "options"} {
		var b bytes.Buffer
		if err := t.ExecuteTemplate(&b, name+".go.tmpl", struct{ Pkg string }{pkg}); err != nil {
			return nil, err
		}
		src, err := format.Source(b.Bytes())
		if err != nil {
			return nil, fmt.Errorf("%s_gen.go: %w", name, err)
		}
		out[name+"_gen.go"] = src
	}
	return out, nil
}
