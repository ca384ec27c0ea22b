package schematest_test

import (
	"errors"
	"fmt"
	"runtime"
	"testing"

	"github.com/acpcompact/acpcompact/internal/acpschema"
	"github.com/acpcompact/acpcompact/internal/acpschema/schematest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recorder is a testing.TB that records what a helper did to it. Its
// FailNow and Skipf end the calling goroutine, as the real ones do; a
// require assertion reports through Errorf and then calls FailNow.
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
func (r *recorder) Name() string { return "recorder" }
func (r *recorder) Errorf(format string, args ...any) {
	r.fatal, r.failed = r.fatal+fmt.Sprintf(format, args...), true
}
func (r *recorder) FailNow() {
	r.failed = true
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
		require.True(t, returned, "For: returned %v, validator %v, recorder %+v", returned, v, r)
		require.Nil(t, v, "For: returned %v, validator %v, recorder %+v", returned, v, r)
		require.False(t, r.failed, "For: returned %v, validator %v, recorder %+v", returned, v, r)
		require.False(t, r.skipped, "For: returned %v, validator %v, recorder %+v", returned, v, r)
		if i == 0 && assert.Len(t, r.logs, 1, "first For's logs") {
			assert.Contains(t, r.logs[0], "SCHEMA CHECKS SKIPPED", "first For's log")
			assert.Contains(t, r.logs[0], dir, "first For's log")
			assert.Contains(t, r.logs[0], "make test-deps", "first For's log")
		}
		if i == 1 {
			assert.Empty(t, r.logs, "second For logged again")
		}

	}
	r, _, returned := call(func(tb testing.TB) *acpschema.Validator { return schematest.Require(tb, 2) })
	if assert.False(t, returned, "Require: returned %v, recorder %+v", returned, r) {
		if assert.True(t, r.skipped, "Require: returned %v, recorder %+v", returned, r) {
			if assert.Contains(t, r.skip, dir, "Require: returned %v, recorder %+v", returned, r) {
				assert.Contains(t, r.skip, "make test-deps", "Require: returned %v, recorder %+v", returned, r)
			}
		}
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
		if assert.False(t, returned, "%s: returned %v, recorder %+v", name, returned, r) {
			if assert.True(t, r.failed, "%s: returned %v, recorder %+v", name, returned, r) {
				if assert.Contains(t, r.fatal, dir, "%s: returned %v, recorder %+v", name, returned, r) {
					assert.Contains(t, r.fatal, schematest.EnvRequire, "%s: returned %v, recorder %+v", name, returned, r)
				}
			}
		}
	}
	r := &recorder{}
	done := make(chan struct{})
	go func() { defer close(done); schematest.Node(r, errors.New("node is not on PATH")) }()
	<-done
	if assert.True(t, r.failed, "Node: recorder %+v", r) {
		if assert.False(t, r.skipped, "Node: recorder %+v", r) {
			assert.Contains(t, r.fatal, "node is not on PATH", "Node: recorder %+v", r)
		}
	}
}

func TestRequiredReadsTheVariableFailSafe(t *testing.T) {
	for value, want := range map[string]bool{"": false, "0": false, "false": false, "1": true, "true": true, "yes": true} {
		t.Setenv(schematest.EnvRequire, value)
		assert.Equal(t, want, schematest.Required(), "%s=%q: Required()", schematest.EnvRequire, value)
	}
}
