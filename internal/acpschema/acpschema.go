// Package acpschema validates JSON against the official ACP v1 and v2 JSON
// Schemas shipped in the npm package @agentclientprotocol/sdk. It is the
// project's external truth, for the CLI (`acpcompact check` and
// `acpcompact proxy --check`) as much as for the tests: the schemas are
// installed, pinned, from npm and never copied into the repository, so a
// check cannot drift from the published contract.
//
// Dir looks for them, in order:
//
//  1. $ACPCOMPACT_SCHEMA_DIR, the directory holding v1/ and v2/; when set,
//     it is the only place looked in;
//  2. when the working directory is in a checkout of this module (the
//     nearest go.mod declares github.com/acpcompact/acpcompact),
//     test/interop/node_modules, which `make test-deps` fills from the
//     lock file; it comes before the user cache so that the tests of a
//     checkout validate against the version its lock file pins;
//  3. the user cache, $(os.UserCacheDir())/acpcompact/schema, which
//     InstallCommand fills from the pinned package.
//
// The tests' policy for a missing schema (skip the schema assertions, or
// fail under ACPCOMPACT_REQUIRE_SCHEMA=1) lives in package schematest.
package acpschema

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// ErrSchemaMissing reports that the schemas are in none of the places Dir
// looks; errors from Dir and For match it with errors.Is and are a
// *MissingError naming those places.
var ErrSchemaMissing = errors.New("acpschema: official ACP schema not installed")

// EnvDir names an environment variable that overrides where the schema
// directory (the one holding v1/ and v2/) is looked up. When it is set (not
// empty), Dir looks nowhere else.
const EnvDir = "ACPCOMPACT_SCHEMA_DIR"

// SDK is the pinned npm package that ships the schemas, as name@version; it
// is the version test/interop/package.json pins.
const SDK = "@agentclientprotocol/sdk@2.4.0"

// module is this module's path: the checkout look-up only trusts a go.mod
// that declares it.
const module = "github.com/acpcompact/acpcompact"

// sdkSchema is where the schemas sit below an npm prefix.
var sdkSchema = filepath.Join("node_modules", "@agentclientprotocol", "sdk", "schema")

// Location is one place Dir looks for the schemas.
type Location struct {
	// Source says what the place is: EnvDir, "checkout" or "user cache".
	Source string
	// Dir is the schema directory (holding v1/schema.json and
	// v2/schema.json), or empty when the place could not be worked out.
	Dir string
	// Problem says why the schemas are not there; empty when they are.
	Problem string
}

func (l Location) String() string {
	name := l.Source
	if l.Dir != "" {
		name += " " + l.Dir
	}
	if l.Problem != "" {
		name += ": " + l.Problem
	}
	return name
}

// MissingError is the error of Dir and For when the schemas are in none of
// the places looked in. It matches ErrSchemaMissing.
type MissingError struct {
	// Looked lists the places looked in, in order.
	Looked []Location
}

func (e *MissingError) Error() string {
	parts := make([]string, len(e.Looked))
	for i, l := range e.Looked {
		parts[i] = l.String()
	}
	return ErrSchemaMissing.Error() + " (looked in " + strings.Join(parts, "; ") + ")"
}

// Is makes errors.Is(err, ErrSchemaMissing) true.
func (e *MissingError) Is(target error) bool { return target == ErrSchemaMissing }

// Dir returns the directory that holds v1/schema.json and v2/schema.json,
// from the first place of the package documentation's list that has them.
func Dir() (string, error) {
	l, err := Locate()
	return l.Dir, err
}

// Locate is Dir, also saying which place the schemas were found in.
func Locate() (Location, error) {
	var looked []Location
	if d := os.Getenv(EnvDir); d != "" {
		l := probe(Location{Source: EnvDir, Dir: d})
		if l.Problem == "" {
			return l, nil
		}
		return Location{}, &MissingError{Looked: []Location{l}}
	}
	places := []Location{userCache()}
	if l, ok := checkout(); ok {
		places = append([]Location{l}, places...)
	}
	for _, l := range places {
		if l.Problem == "" {
			l = probe(l)
		}
		if l.Problem == "" {
			return l, nil
		}
		looked = append(looked, l)
	}
	return Location{}, &MissingError{Looked: looked}
}

// CachePrefix returns the npm prefix of the user cache location,
// $(os.UserCacheDir())/acpcompact/schema; the schemas sit in its
// node_modules/@agentclientprotocol/sdk/schema.
func CachePrefix() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "acpcompact", "schema"), nil
}

// InstallCommand returns the one-line shell command that installs the
// pinned schemas into the user cache location, where Dir finds them from
// any directory.
func InstallCommand() string {
	prefix, err := CachePrefix()
	if err != nil {
		prefix = filepath.Join("<user cache dir>", "acpcompact", "schema")
	}
	return "npm install --prefix " + shellQuote(prefix) + " " + SDK
}

func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`!*?[]{}()<>|&;#~") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func userCache() Location {
	prefix, err := CachePrefix()
	if err != nil {
		return Location{Source: "user cache", Problem: err.Error()}
	}
	return Location{Source: "user cache", Dir: filepath.Join(prefix, sdkSchema)}
}

// checkout returns the schema location of the checkout of this module at
// or above the working directory; ok is false outside one.
func checkout() (l Location, ok bool) {
	wd, err := os.Getwd()
	if err != nil {
		return Location{}, false
	}
	for d := wd; ; d = filepath.Dir(d) {
		if mod, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil {
			if modulePath(mod) != module {
				return Location{}, false
			}
			return Location{Source: "checkout", Dir: filepath.Join(d, "test", "interop", sdkSchema)}, true
		}
		if filepath.Dir(d) == d {
			return Location{}, false
		}
	}
}

func modulePath(gomod []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`)
		}
	}
	return ""
}

// probe sets l.Problem when l.Dir lacks either schema.
func probe(l Location) Location {
	for _, v := range []string{"v1", "v2"} {
		if _, err := os.Stat(filepath.Join(l.Dir, v, "schema.json")); err != nil {
			l.Problem = "no " + filepath.Join(v, "schema.json")
			return l
		}
	}
	return l
}

// Validator checks documents against one protocol version's schema. It is
// safe for concurrent use.
//
// A nil *Validator stands for a schema that is not installed: it accepts
// every document. schematest.For gives a test one when the schema is
// missing, so that the test's schema assertions pass without checking
// anything while the rest of the test runs; For never returns one.
type Validator struct {
	version  int
	update   *jsonschema.Schema
	message  *jsonschema.Schema
	notifRef *jsonschema.Schema
}

var (
	cacheMu sync.Mutex
	cache   = map[int]*Validator{}
)

// For returns the validator of protocol version 1 or 2. Validators are
// compiled once and shared.
func For(version int) (*Validator, error) {
	if version != 1 && version != 2 {
		return nil, fmt.Errorf("acpschema: unknown protocol version %d", version)
	}
	cacheMu.Lock()
	defer cacheMu.Unlock()
	if v, ok := cache[version]; ok {
		return v, nil
	}
	dir, err := Dir()
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, fmt.Sprintf("v%d", version), "schema.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSchemaMissing, err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("acpschema: parse %s: %w", path, err)
	}
	c := jsonschema.NewCompiler()
	url := fmt.Sprintf("https://acpcompact.invalid/v%d/schema.json", version)
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	v := &Validator{version: version}
	if v.update, err = c.Compile(url + "#/$defs/SessionUpdate"); err != nil {
		return nil, fmt.Errorf("acpschema: compile SessionUpdate: %w", err)
	}
	notif := "SessionNotification" // v2 renamed it
	if version == 2 {
		notif = "UpdateSessionNotification"
	}
	if v.notifRef, err = c.Compile(url + "#/$defs/" + notif); err != nil {
		return nil, fmt.Errorf("acpschema: compile %s: %w", notif, err)
	}
	if v.message, err = c.Compile(url); err != nil {
		return nil, fmt.Errorf("acpschema: compile root: %w", err)
	}
	cache[version] = v
	return v, nil
}

// Version reports the protocol version this validator checks (0 for a nil
// Validator).
func (v *Validator) Version() int {
	if v == nil {
		return 0
	}
	return v.version
}

// Update validates one SessionUpdate object (the value of params.update).
func (v *Validator) Update(raw []byte) error {
	if v == nil {
		return nil
	}
	return validate(v.update, raw)
}

// Notification validates session/update params ({sessionId, update, _meta}).
func (v *Validator) Notification(raw []byte) error {
	if v == nil {
		return nil
	}
	return validate(v.notifRef, raw)
}

// Message validates a whole JSON-RPC message against the schema's root,
// which accepts any request, response or notification of either side.
func (v *Validator) Message(raw []byte) error {
	if v == nil {
		return nil
	}
	return validate(v.message, raw)
}

func validate(s *jsonschema.Schema, raw []byte) error {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("acpschema: not JSON: %w", err)
	}
	if err := s.Validate(inst); err != nil {
		return fmt.Errorf("acpschema: %s: %w", compact(raw), err)
	}
	return nil
}

func compact(raw []byte) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	if b.Len() > 300 {
		return b.String()[:300] + "…"
	}
	return b.String()
}
