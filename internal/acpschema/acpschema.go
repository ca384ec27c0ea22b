// Package acpschema validates JSON against the official ACP v1 and v2 JSON
// Schemas shipped in the npm package @agentclientprotocol/sdk. It is the
// project's external truth in tests: the schemas are installed, pinned, by
// `make test-deps` into test/interop/node_modules and never copied into the
// repository, so a test cannot drift from the published contract.
package acpschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// ErrSchemaMissing reports that the npm package holding the schemas is not
// installed. Run `make test-deps` (or `make test`, which does it first).
var ErrSchemaMissing = errors.New("acpschema: official ACP schema not installed; run `make test-deps`")

// EnvDir names an environment variable that overrides where the schema
// directory (the one holding v1/ and v2/) is looked up.
const EnvDir = "ACPCOMPACT_SCHEMA_DIR"

// Validator checks documents against one protocol version's schema. It is
// safe for concurrent use.
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

// Dir returns the directory that holds v1/schema.json and v2/schema.json.
func Dir() (string, error) {
	if d := os.Getenv(EnvDir); d != "" {
		return d, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			dir := filepath.Join(d, "test", "interop", "node_modules", "@agentclientprotocol", "sdk", "schema")
			if _, err := os.Stat(filepath.Join(dir, "v1", "schema.json")); err != nil {
				return "", fmt.Errorf("%w (looked in %s)", ErrSchemaMissing, dir)
			}
			return dir, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("%w (no go.mod above %s)", ErrSchemaMissing, wd)
		}
	}
}

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

// Version reports the protocol version this validator checks.
func (v *Validator) Version() int { return v.version }

// Update validates one SessionUpdate object (the value of params.update).
func (v *Validator) Update(raw []byte) error { return validate(v.update, raw) }

// Notification validates session/update params ({sessionId, update, _meta}).
func (v *Validator) Notification(raw []byte) error { return validate(v.notifRef, raw) }

// Message validates a whole JSON-RPC message against the schema's root,
// which accepts any request, response or notification of either side.
func (v *Validator) Message(raw []byte) error { return validate(v.message, raw) }

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
