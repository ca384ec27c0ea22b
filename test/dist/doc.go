// Package dist tests the npm distribution of acpcompact as a user gets
// it: the dist builder (npm/mkdist, which `make dist` runs) builds the
// host's platform package and the launcher twice, reproducibly; npm
// installs the tarballs offline, from an empty cache, into a temporary
// prefix; and the installed launcher runs the proxy with the ACP scenario
// agent behind it, passes exit statuses through, forwards signals, ends as
// its child ends and explains a missing platform package. It has no code
// of its own; the tests need node and npm (skipped without them, failed
// under ACPCOMPACT_REQUIRE_SCHEMA=1).
package dist
