package main

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"
)

// requireBrowserEnv makes a missing browser a failure instead of a skip.
const requireBrowserEnv = "ACPCOMPACT_REQUIRE_BROWSER"

// chromium returns Debian's chromium, or skips the test (fails it under
// ACPCOMPACT_REQUIRE_BROWSER=1) where none is installed.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const why = "no chromium on this machine (Debian: apt-get install chromium): the page is not rendered by a browser here"
	if os.Getenv(requireBrowserEnv) == "1" {
		require.FailNow(t, why, "%s=1 requires it", requireBrowserEnv)
	}
	t.Skip(why + "; " + requireBrowserEnv + "=1 makes this a failure")
	return ""
}

// runChromium runs headless chromium on a fresh profile with everything
// that would reach the network off, and returns its stdout.
func runChromium(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang guard; it takes a second or two
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--user-data-dir=" + t.TempDir()}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "chromium %v\nstderr:\n%s", args, stderr.String())
	return stdout.Bytes()
}

// TestCheckHTMLRendersInChromium opens the page of a recorded Claude ACP
// compaction in a real browser (headless chromium) and reads back the DOM
// the browser built: the same rows, the compaction's final status, the
// violation at its line. Then it takes a screenshot, which must show
// something. It skips where chromium is not installed.
func TestCheckHTMLRendersInChromium(t *testing.T) {
	bin := chromium(t)
	file := filepath.Join("..", "..", "test", "peers", "testdata", "claude-acp-0.101.0", "compact-cap.jsonl")
	_, ours, b := checkHTML(t, file)
	dir := t.TempDir()
	pagePath := filepath.Join(dir, "timeline.html")
	require.NoError(t, os.WriteFile(pagePath, b, 0o600))
	url := "file://" + filepath.ToSlash(pagePath)

	dom := runChromium(t, bin, "--dump-dom", url)
	p := parsePage(t, dom)
	assert.Len(t, p.rows(""), len(ours.rows("")), "the browser built every row the page has")
	c := p.row(t, "compaction", "336610cf-a34a-454e-b2d8-fd180e2d9e7e")
	status, _ := attr(c, "data-status")
	assert.Equal(t, "completed", status)
	assert.Contains(t, text(c), "MOCK SUMMARY: the user said hello and the assistant greeted them.")
	assert.Equal(t, []string{"20 terminal"}, p.violations())
	assert.Empty(t, all(p.root, func(n *html.Node) bool { return n.Data == "script" }), "no script in the DOM")

	shot := filepath.Join(dir, "timeline.png")
	runChromium(t, bin, "--window-size=1000,1400", "--hide-scrollbars", "--screenshot="+shot, url)
	f, err := os.Open(shot)
	require.NoError(t, err, "the screenshot")
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err, "the screenshot is a PNG")
	bounds := img.Bounds()
	assert.Equal(t, 1000, bounds.Dx(), "the screenshot's width")
	colours := map[uint32]bool{}
	for y := bounds.Min.Y; y < bounds.Max.Y; y += 7 {
		for x := bounds.Min.X; x < bounds.Max.X; x += 7 {
			r, g, b, _ := img.At(x, y).RGBA()
			colours[r>>8<<16|g>>8<<8|b>>8] = true
		}
	}
	assert.Greater(t, len(colours), 20, "the screenshot shows a page, not a blank")
}
