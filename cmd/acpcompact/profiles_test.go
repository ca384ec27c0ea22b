package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/acpcompact/acpcompact/proxy"
)

func TestProxyProfilesFlagListsThem(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := runProxy(context.Background(), []string{"--profiles"}, strings.NewReader(""), &out, &errOut); code != 0 {
		t.Fatalf("--profiles: exit %d, stderr %s", code, errOut.String())
	}
	for _, p := range proxy.Profiles() {
		if !strings.Contains(out.String(), "\n"+p.Name+"\n") || !strings.Contains(out.String(), p.Agent) {
			t.Errorf("--profiles does not list %s (%s):\n%s", p.Name, p.Agent, out.String())
		}
	}
}

func TestProxyProfileFlagsAreChecked(t *testing.T) {
	for _, args := range [][]string{
		{"--profile=bogus", "--", "true"},
		{"--summaries=some", "--", "true"},
		{"--translate=bogus", "--", "true"},
	} {
		var errOut bytes.Buffer
		if code := runProxy(context.Background(), args, strings.NewReader(""), &bytes.Buffer{}, &errOut); code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %s)", args, code, errOut.String())
		}
	}
}
