package main

import (
	"bytes"
	"context"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBuildVersionPrefersTheStampThenGoThenDevel(t *testing.T) {
	info := func(v string) func() (*debug.BuildInfo, bool) {
		return func() (*debug.BuildInfo, bool) { return &debug.BuildInfo{Main: debug.Module{Version: v}}, true }
	}
	none := func() (*debug.BuildInfo, bool) { return nil, false }
	assert.Equal(t, "v0.1.0", buildVersion("v0.1.0", info("v0.0.9")), "a make dist stamp wins over what Go recorded")
	assert.Equal(t, "v0.0.9", buildVersion("", info("v0.0.9")), "go install …@v0.0.9 records its version")
	assert.Equal(t, "(devel)", buildVersion("", info("(devel)")))
	assert.Equal(t, "(devel)", buildVersion("", info("")), "no version recorded")
	assert.Equal(t, "(devel)", buildVersion("", none), "no build information")
}

func TestVersionSubcommandPrintsOneLineAndIsListed(t *testing.T) {
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run(context.Background(), []string{"version"}, nil, &out, &errOut), errOut.String())
	assert.Regexp(t, `^acpcompact (v\d+\.\d+\.\d+\S*|\(devel\))\n$`, out.String())

	out.Reset()
	require.Equal(t, 0, run(context.Background(), []string{"help"}, nil, &out, &errOut))
	assert.Contains(t, out.String(), "\n  version  ", "the usage text lists the version command")

	errOut.Reset()
	assert.Equal(t, 2, run(context.Background(), []string{"version", "extra"}, nil, &out, &errOut))
	assert.True(t, strings.HasPrefix(errOut.String(), `acpcompact version: unexpected argument "extra"`), errOut.String())
}
