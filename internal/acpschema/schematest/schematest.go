// Package schematest decides, in one place, what a test does when the
// official ACP schema is not installed.
//
// By default the schema assertions are skipped and everything else still
// runs: For returns a nil *acpschema.Validator, which accepts every
// document, and the test logs, once per test binary, that the schema checks
// were skipped and that `make test-deps` installs the schema. Tests that
// exist only to check against the schema call Require, which skips them
// with the same message.
//
// With ACPCOMPACT_REQUIRE_SCHEMA=1 (set by `make test` and so by CI) a
// missing schema fails the test instead, naming the places looked in, so
// CI cannot pass without validating. The same switch turns the skips of the
// Node.js tests (the TypeScript SDK interop tests and benchmarks) into
// failures: see Node.
package schematest

import (
	"os"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/acpcompact/acpcompact/internal/acpschema"
	"github.com/stretchr/testify/require"
)

// EnvRequire names the environment variable that makes a missing schema (or
// a missing Node.js set-up for the tests that need one) a test failure
// rather than a skip. `make test` and .ci/run set it to 1.
const EnvRequire = "ACPCOMPACT_REQUIRE_SCHEMA"

// Required reports whether EnvRequire is set: any value strconv.ParseBool
// reads as true, or one it cannot read (a typo must not turn CI's checks
// off); empty, "0" and "false" are off.
func Required() bool {
	s := os.Getenv(EnvRequire)
	if s == "" {
		return false
	}
	on, err := strconv.ParseBool(s)
	return on || err != nil
}

// Hint says how to install the schema for the tests, or make its absence
// fail.
const Hint = "run `make test-deps` to install it (or set " + acpschema.EnvDir +
	"); set " + EnvRequire + "=1 to make a missing schema fail the tests"

// noted is set once the skip has been logged: once per test binary.
var noted atomic.Bool

// For returns the official validator of protocol version 1 or 2 for tb's
// schema assertions. When the schema is not installed it fails tb under
// ACPCOMPACT_REQUIRE_SCHEMA=1; otherwise it returns nil, a validator that
// accepts everything, and the first test of the binary to get one logs why
// its schema checks were skipped. Any other error (a schema that does not
// compile, a bad version) fails tb.
func For(tb testing.TB, version int) *acpschema.Validator {
	tb.Helper()
	v, err := load(tb, version)
	if err == nil {
		return v
	}
	if noted.CompareAndSwap(false, true) {
		tb.Logf("SCHEMA CHECKS SKIPPED in this package's tests: %v; %s", err, Hint)
	}
	return nil
}

// Require returns the official validator of protocol version 1 or 2 for a
// test that exists only to check against the schema. When the schema is not
// installed it skips tb, or fails it under ACPCOMPACT_REQUIRE_SCHEMA=1.
func Require(tb testing.TB, version int) *acpschema.Validator {
	tb.Helper()
	v, err := load(tb, version)
	if err == nil {
		return v
	}
	tb.Skipf("SKIPPED, it checks against the official ACP schema: %v; %s", err, Hint)
	return nil
}

// load returns the official validator of version, or the error of a
// missing schema that may be skipped; any other failure, or a missing
// schema under ACPCOMPACT_REQUIRE_SCHEMA=1, fails tb.
func load(tb testing.TB, version int) (*acpschema.Validator, error) {
	tb.Helper()
	v, err := acpschema.For(version)
	if err != nil {
		require.ErrorIs(tb, err, acpschema.ErrSchemaMissing, "official ACP v%d schema", version)
		require.False(tb, Required(), "official ACP v%d schema required (%s is set): %v; run `make test-deps` (or set %s)",
			version, EnvRequire, err, acpschema.EnvDir)
	}
	return v, err
}

// Node skips tb, loudly, because what it needs from Node.js (the node
// executable, the npm packages of test/interop) is missing, as why says
// (with how to install it); under ACPCOMPACT_REQUIRE_SCHEMA=1 it fails tb
// instead.
func Node(tb testing.TB, why error) {
	tb.Helper()
	require.False(tb, Required(), "%v (required: %s is set)", why, EnvRequire)
	tb.Skipf("SKIPPED: %v; set %s=1 to make this a failure", why, EnvRequire)
}
