// Command mkdist builds acpcompact's npm packages, so that editor users
// with Node.js and no Go toolchain can install the proxy (`make dist` runs
// it; docs/proxy.md, "Install" and "Publishing"): for each platform a
// native binary cross-compiled reproducibly and its package
// (@acpcompact/<platform>-<arch>, with os and cpu set), the launcher
// package (acpcompact, whose bin runs the platform package's binary and
// which names every platform package as an exact-version optional
// dependency), an `npm pack` tarball of each, and SHA256SUMS of the
// binaries and tarballs.
//
// Usage, from the module root:
//
//	go run ./npm/mkdist [-version vX.Y.Z] [-platforms GOOS/GOARCH,...] [-o DIR]
//
// -version defaults to the VERSION file, the project's one source of the
// release version (npm drops its "v"). -o DIR (default dist) is replaced
// whole. Every binary is built with CGO_ENABLED=0, -trimpath,
// -buildvcs=false and -ldflags "-s -w -X main.version=VERSION" and the
// architecture level pinned (GOAMD64=v1, GOARM64=v8.0), and every file is
// written with a fixed mode; npm pack stamps every entry with a fixed time.
// So two runs with the same Go and npm give the same bytes.
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/mod/semver"
)

// Names of the npm packages. The launcher finds its platform package as
// platformScope + process.platform + "-" + process.arch.
const (
	launcherName  = "acpcompact"
	platformScope = "@acpcompact/"
	repository    = "https://github.com/acpcompact/acpcompact"
	mainPackage   = "./cmd/acpcompact"
)

// platform is one GOOS/GOARCH and its npm os/cpu names.
type platform struct {
	goos, goarch string
	os, cpu      string // process.platform, process.arch
}

func (p platform) pkgName() string { return platformScope + p.os + "-" + p.cpu }
func (p platform) dir() string     { return p.os + "-" + p.cpu }
func (p platform) exe() string {
	if p.goos == "windows" {
		return "acpcompact.exe"
	}
	return "acpcompact"
}

// platforms are those the npm packages cover: what codex-acp and Copilot
// CLI ship native binaries for.
var platforms = []platform{
	{"linux", "amd64", "linux", "x64"},
	{"linux", "arm64", "linux", "arm64"},
	{"darwin", "amd64", "darwin", "x64"},
	{"darwin", "arm64", "darwin", "arm64"},
	{"windows", "amd64", "win32", "x64"},
	{"windows", "arm64", "win32", "arm64"},
}

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "mkdist: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("mkdist", flag.ContinueOnError)
	fs.SetOutput(stderr)
	version := fs.String("version", "", "the release version, vX.Y.Z (default: the VERSION file)")
	out := fs.String("o", "dist", "the output directory, replaced whole")
	var all []string
	for _, p := range platforms {
		all = append(all, p.goos+"/"+p.goarch)
	}
	only := fs.String("platforms", strings.Join(all, ","), "comma-separated GOOS/GOARCH to build")
	printOnly := fs.Bool("print", false, "build nothing: print each package's name, version and tarball, in the order to publish them (the platform packages first, then the launcher)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	if *version == "" {
		b, err := os.ReadFile(filepath.Join(root, "VERSION"))
		if err != nil {
			return err
		}
		*version = strings.TrimSpace(string(b))
	}
	if !semver.IsValid(*version) || semver.Canonical(*version) != *version {
		return fmt.Errorf("version %q is not vMAJOR.MINOR.PATCH[-PRERELEASE]", *version)
	}
	var chosen []platform
	for _, s := range strings.Split(*only, ",") {
		i := slices.IndexFunc(platforms, func(p platform) bool { return p.goos+"/"+p.goarch == strings.TrimSpace(s) })
		if i < 0 {
			return fmt.Errorf("no npm package for platform %q (there are %s)", s, strings.Join(all, ", "))
		}
		chosen = append(chosen, platforms[i])
	}
	d := &dist{root: root, version: *version, npmVersion: strings.TrimPrefix(*version, "v"), log: stdout}
	if *printOnly {
		for _, p := range chosen {
			fmt.Fprintln(stdout, p.pkgName(), d.npmVersion, tarball(p.pkgName(), d.npmVersion))
		}
		fmt.Fprintln(stdout, launcherName, d.npmVersion, tarball(launcherName, d.npmVersion))
		return nil
	}
	d.out, err = filepath.Abs(*out)
	if err != nil {
		return err
	}
	return d.build(chosen)
}

// dist is one run: where the module is, the version, where it writes.
type dist struct {
	root, out           string
	version, npmVersion string
	log                 io.Writer
}

func (d *dist) build(chosen []platform) error {
	for _, marker := range []string{"go.mod", ".git"} {
		if _, err := os.Stat(filepath.Join(d.out, marker)); err == nil {
			return fmt.Errorf("refusing to replace %s: it holds %s", d.out, marker)
		}
	}
	if err := os.RemoveAll(d.out); err != nil {
		return err
	}
	var dirs []string
	for _, p := range chosen {
		dir := filepath.Join(d.out, "npm", p.dir())
		if err := d.goBuild(p, filepath.Join(dir, "bin", p.exe())); err != nil {
			return err
		}
		if err := d.writePlatformPackage(p, dir); err != nil {
			return err
		}
		dirs = append(dirs, dir)
	}
	dir := filepath.Join(d.out, "npm", launcherName)
	if err := d.writeLauncherPackage(dir); err != nil {
		return err
	}
	if err := d.pack(append(dirs, dir)); err != nil {
		return err
	}
	return d.writeSums()
}

// goBuild cross-compiles the acpcompact binary for p, reproducibly.
func (d *dist) goBuild(p platform, bin string) error {
	args := []string{"build", "-trimpath", "-buildvcs=false",
		"-ldflags", "-s -w -X main.version=" + d.version, "-o", bin, mainPackage}
	env := []string{"CGO_ENABLED=0", "GOOS=" + p.goos, "GOARCH=" + p.goarch,
		"GOAMD64=v1", "GOARM64=v8.0", "GOFLAGS=-mod=readonly"}
	fmt.Fprintf(d.log, "%s go %s\n", strings.Join(env, " "), shellJoin(args))
	cmd := exec.Command("go", args...)
	cmd.Dir = d.root
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build for %s/%s: %v\n%s", p.goos, p.goarch, err, out)
	}
	return os.Chmod(bin, 0o755)
}

// packageJSON is the manifest of a package, its fields in a fixed order.
type packageJSON struct {
	Name                 string            `json:"name"`
	Version              string            `json:"version"`
	Description          string            `json:"description"`
	Homepage             string            `json:"homepage"`
	Repository           repo              `json:"repository"`
	Bin                  map[string]string `json:"bin,omitempty"`
	Files                []string          `json:"files"`
	OS                   []string          `json:"os,omitempty"`
	CPU                  []string          `json:"cpu,omitempty"`
	Engines              map[string]string `json:"engines,omitempty"`
	OptionalDependencies map[string]string `json:"optionalDependencies,omitempty"`
	PreferUnplugged      bool              `json:"preferUnplugged,omitempty"`
	PublishConfig        map[string]string `json:"publishConfig,omitempty"`
}

type repo struct {
	Type string `json:"type"`
	URL  string `json:"url"`
}

func (d *dist) manifest(name, description string) packageJSON {
	return packageJSON{
		Name: name, Version: d.npmVersion, Description: description, Homepage: repository + "#readme",
		Repository: repo{Type: "git", URL: "git+" + repository + ".git"},
		// Scoped packages are private unless published public.
		PublishConfig: map[string]string{"access": "public"},
	}
}

func (d *dist) writePlatformPackage(p platform, dir string) error {
	m := d.manifest(p.pkgName(), fmt.Sprintf("The acpcompact binary for %s %s, run by the %s package.", p.os, p.cpu, launcherName))
	m.Files = []string{"bin/" + p.exe()}
	m.OS, m.CPU = []string{p.os}, []string{p.cpu}
	// Yarn PnP: a binary must be on disk to be executed.
	m.PreferUnplugged = true
	readme := fmt.Sprintf("# %s\n\nThe `acpcompact` %s binary for %s on %s, built from %s at %s.\n"+
		"Install the [`%s`](https://www.npmjs.com/package/%s) package instead: it installs this one\n"+
		"where it fits and runs it.\n", p.pkgName(), d.version, p.cpu, p.os, repository, d.version, launcherName, launcherName)
	return writeFiles(dir, m, map[string]string{"README.md": readme})
}

func (d *dist) writeLauncherPackage(dir string) error {
	m := d.manifest(launcherName,
		"Correct context-compaction reporting for ACP agents you cannot change: acpcompact proxy -- AGENT. Prebuilt native binaries; no Go toolchain needed.")
	m.Bin = map[string]string{launcherName: "bin/acpcompact.js"}
	m.Files = []string{"bin/acpcompact.js"}
	m.Engines = map[string]string{"node": ">=18"}
	m.OptionalDependencies = map[string]string{}
	for _, p := range platforms { // every platform, whichever were built
		m.OptionalDependencies[p.pkgName()] = d.npmVersion
	}
	m.PublishConfig = nil
	src := filepath.Join(d.root, "npm", launcherName)
	files := map[string]string{}
	for _, f := range []string{"README.md", filepath.Join("bin", "acpcompact.js")} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			return err
		}
		files[f] = string(b)
	}
	return writeFiles(dir, m, files)
}

// writeFiles writes package.json and the files into dir, with fixed modes
// (npm pack keeps them; a umask must not change the tarball).
func writeFiles(dir string, m packageJSON, files map[string]string) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // ">=18", not "\u003e=18"
	enc.SetIndent("", "  ")
	if err := enc.Encode(m); err != nil {
		return err
	}
	files["package.json"] = b.String()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if strings.HasPrefix(name, "bin"+string(filepath.Separator)) {
			mode = 0o755
		}
		if err := os.WriteFile(path, []byte(content), mode); err != nil {
			return err
		}
		if err := os.Chmod(path, mode); err != nil {
			return err
		}
	}
	return nil
}

// pack runs npm pack on the package directories (one npm process: each
// costs a Node start), writing the tarballs into the output directory.
func (d *dist) pack(dirs []string) error {
	args := append([]string{"pack", "--json", "--ignore-scripts", "--loglevel=error", "--pack-destination", d.out}, dirs...)
	fmt.Fprintf(d.log, "npm %s\n", shellJoin(args))
	cmd := exec.Command("npm", args...)
	cmd.Dir = d.out
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("npm pack: %v\n%s", err, stderr.Bytes())
	}
	var res []struct {
		Filename string `json:"filename"`
	}
	if err := json.Unmarshal(out, &res); err != nil || len(res) != len(dirs) {
		return fmt.Errorf("npm pack: unexpected output %q (%v)", out, err)
	}
	for i, r := range res {
		var m packageJSON
		b, err := os.ReadFile(filepath.Join(dirs[i], "package.json"))
		if err == nil {
			err = json.Unmarshal(b, &m)
		}
		if err != nil {
			return err
		}
		if want := tarball(m.Name, m.Version); r.Filename != want {
			// -print, and so the docs, name the tarballs so.
			return fmt.Errorf("npm pack wrote %s for %s, not %s", r.Filename, m.Name, want)
		}
	}
	return nil
}

// tarball is the file name npm pack gives the package: the scope's @
// dropped and its slash a dash.
func tarball(name, version string) string {
	return strings.ReplaceAll(strings.TrimPrefix(name, "@"), "/", "-") + "-" + version + ".tgz"
}

// writeSums writes SHA256SUMS: every tarball and binary under the output
// directory, in sha256sum's format, sorted by path.
func (d *dist) writeSums() error {
	var lines []string
	err := filepath.WalkDir(d.out, func(path string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(d.out, path)
		rel = filepath.ToSlash(rel)
		if !strings.HasSuffix(rel, ".tgz") && !strings.HasSuffix(rel, "/bin/acpcompact") && !strings.HasSuffix(rel, "/bin/acpcompact.exe") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		lines = append(lines, hex.EncodeToString(sum[:])+"  "+rel)
		return nil
	})
	if err != nil {
		return err
	}
	slices.SortFunc(lines, func(a, b string) int { return strings.Compare(a[66:], b[66:]) })
	sums := strings.Join(lines, "\n") + "\n"
	fmt.Fprint(d.log, sums)
	return os.WriteFile(filepath.Join(d.out, "SHA256SUMS"), []byte(sums), 0o644)
}

// moduleRoot is the directory of the go.mod above the working directory.
func moduleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod above %s", wd)
		}
	}
}

// shellJoin renders args for a log line, quoting those with spaces.
func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if strings.ContainsAny(a, " \t\"'") {
			a = "'" + a + "'"
		}
		q[i] = a
	}
	return strings.Join(q, " ")
}
