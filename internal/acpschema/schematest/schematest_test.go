package schematest_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/acpcompact/acpcompact/internal/acpschema"
	"github.com/acpcompact/acpcompact/internal/acpschema/schematest"
)

// recorder is a testing.TB that records what a helper did to it. Its
// Fatalf and Skipf end the calling goroutine, as the real ones do.
type recorder struct {
	testing.TB
	logs            []string
	fatal, skip     string
	failed, skipped bool
}

func (r *recorder) Helper() {}
func (r *recorder) Logf(format string, args ...any) {
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.fatal, r.failed = fmt.Sprintf(format, args...), true
	runtime.Goexit()
}
func (r *recorder) Skipf(format string, args ...any) {
	r.skip, r.skipped = fmt.Sprintf(format, args...), true
	runtime.Goexit()
}

// call runs f on a recorder in its own goroutine, so that a Goexit ends
// only that goroutine.
func call(f func(testing.TB) *acpschema.Validator) (*recorder, *acpschema.Validator, bool) {
	r := &recorder{}
	var v *acpschema.Validator
	returned := false
	done := make(chan struct{})
	go func() {
		defer close(done)
		v = f(r)
		returned = true
	}()
	<-done
	return r, v, returned
}

// hideSchema makes every look-up fail. acpschema keeps compiled validators
// for the process, so no test of this package may load the real schema.
func hideSchema(t *testing.T) string {
	dir := t.TempDir() + "/nonexistent"
	t.Setenv(acpschema.EnvDir, dir)
	return dir
}

func TestWithoutTheSchemaForReturnsNilAndLogsOnceAndRequireSkips(t *testing.T) {
	dir := hideSchema(t)
	t.Setenv(schematest.EnvRequire, "")
	schematest.ResetNote()
	for i := range 2 {
		r, v, returned := call(func(tb testing.TB) *acpschema.Validator { return schematest.For(tb, 1) })
		if !returned || v != nil || r.failed || r.skipped {
			t.Fatalf("For: returned %v, validator %v, recorder %+v", returned, v, r)
		}
		if i == 0 && (len(r.logs) != 1 || !strings.Contains(r.logs[0], "SCHEMA CHECKS SKIPPED") ||
			!strings.Contains(r.logs[0], dir) || !strings.Contains(r.logs[0], "make test-deps")) {
			t.Errorf("first For logged %q", r.logs)
		}
		if i == 1 && len(r.logs) != 0 {
			t.Errorf("second For logged again: %q", r.logs)
		}
	}
	r, _, returned := call(func(tb testing.TB) *acpschema.Validator { return schematest.Require(tb, 2) })
	if returned || !r.skipped || !strings.Contains(r.skip, dir) || !strings.Contains(r.skip, "make test-deps") {
		t.Errorf("Require: returned %v, recorder %+v", returned, r)
	}
}

func TestWithoutTheSchemaRequiredFailsNamingWhereItLooked(t *testing.T) {
	dir := hideSchema(t)
	t.Setenv(schematest.EnvRequire, "1")
	for name, f := range map[string]func(testing.TB) *acpschema.Validator{
		"For":     func(tb testing.TB) *acpschema.Validator { return schematest.For(tb, 1) },
		"Require": func(tb testing.TB) *acpschema.Validator { return schematest.Require(tb, 1) },
	} {
		r, _, returned := call(f)
		if returned || !r.failed || !strings.Contains(r.fatal, dir) || !strings.Contains(r.fatal, schematest.EnvRequire) {
			t.Errorf("%s: returned %v, recorder %+v", name, returned, r)
		}
	}
	r := &recorder{}
	done := make(chan struct{})
	go func() { defer close(done); schematest.Node(r, errors.New("node is not on PATH")) }()
	<-done
	if !r.failed || r.skipped || !strings.Contains(r.fatal, "node is not on PATH") {
		t.Errorf("Node: recorder %+v", r)
	}
}

func TestRequiredReadsTheVariableFailSafe(t *testing.T) {
	for value, want := range map[string]bool{"": false, "0": false, "false": false, "1": true, "true": true, "yes": true} {
		t.Setenv(schematest.EnvRequire, value)
		if got := schematest.Required(); got != want {
			t.Errorf("%s=%q: Required() = %v, want %v", schematest.EnvRequire, value, got, want)
		}
	}
}
