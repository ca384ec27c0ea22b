package main

import (
	"errors"
	"strings"

	"github.com/acpcompact/acpcompact/internal/acpschema"
)

// schemaProblem phrases why schema validation is off for a user who may
// have only the binary.
func schemaProblem(err error) string {
	return strings.TrimPrefix(err.Error(), "acpschema: ")
}

// schemaFix says how to install the official schema where acpcompact finds
// it from any directory, or is empty when err is not that it is missing.
func schemaFix(err error) string {
	if !errors.Is(err, acpschema.ErrSchemaMissing) {
		return ""
	}
	return "install it with: " + acpschema.InstallCommand() +
		" (or set " + acpschema.EnvDir + " to a directory holding v1/schema.json and v2/schema.json;" +
		" in a checkout of acpcompact, `make test-deps` also installs it)"
}

// loadSchema is the schema loader of `proxy --check`, a variable so that a
// test can make an installed schema disappear (acpschema compiles each
// validator once per process).
var loadSchema = schemaOption

// schemaUsage is the help text's paragraph on where the schema is found.
func schemaUsage() string {
	return `
The official ACP JSON Schema (for --schema, and for proxy --check) is looked
for in $` + acpschema.EnvDir + ` (a directory holding v1/ and v2/) when it is
set, else in test/interop/node_modules when run in a checkout of acpcompact
(make test-deps), else in the user cache, which this fills:

  ` + acpschema.InstallCommand() + `

`
}
