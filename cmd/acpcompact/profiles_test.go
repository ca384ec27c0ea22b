package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/acpcompact/acpcompact/proxy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestProxyProfilesFlagListsThem(t *testing.T) {
	var out, errOut bytes.Buffer
	code := runProxy(context.Background(), []string{"--profiles"}, strings.NewReader(""), &out, &errOut)
	require.Equal(t, 0, code, "--profiles: exit code; stderr %s", errOut.String())
	for _, p := range proxy.Profiles() {
		assert.Contains(t, out.String(), "\n"+p.Name+"\n", "--profiles does not list %s", p.Name)
		assert.Contains(t, out.String(), p.Agent, "--profiles does not list %s's agent", p.Name)
	}
}

func TestProxyProfileFlagsAreChecked(t *testing.T) {
	for _, args := range [][]string{
		{"--profile=bogus", "--", "true"},
		{"--summaries=some", "--", "true"},
		{"--translate=bogus", "--", "true"},
	} {
		var errOut bytes.Buffer
		code := runProxy(context.Background(), args, strings.NewReader(""), &bytes.Buffer{}, &errOut)
		assert.Equal(t, 2, code, "%v: exit code (stderr %s)", args, errOut.String())
	}
}
