package acpschema_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acpcompact/acpcompact/internal/acpschema"
	"github.com/acpcompact/acpcompact/internal/acpschema/schematest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOfficialSchemaAcceptsRFDExamplesAndRejectsBrokenOnes(t *testing.T) {
	good := []string{
		`{"sessionUpdate":"compaction_update","compactionId":"cmp_001","status":"in_progress"}`,
		`{"sessionUpdate":"compaction_summary_chunk","compactionId":"cmp_001","content":{"type":"text","text":"## Retained context\n\n"}}`,
		`{"sessionUpdate":"compaction_update","compactionId":"cmp_001","status":"completed","summary":[{"type":"text","text":"x"}]}`,
		`{"sessionUpdate":"compaction_update","compactionId":"c","status":"_vendor_state","summary":null,"error":null,"_meta":null}`,
	}
	bad := []string{
		`{"sessionUpdate":"compaction_update","compactionId":"cmp_001"}`,
		`{"sessionUpdate":"compaction_summary_chunk","compactionId":"cmp_001","content":"text"}`,
		`{"sessionUpdate":"compaction_update","compactionId":"c","status":"completed","summary":"x"}`,
		`{"sessionUpdate":"compaction_update","compactionId":"c","status":"failed","error":7}`,
	}
	for _, ver := range []int{1, 2} {
		v := schematest.Require(t, ver)
		for _, g := range good {
			assert.NoError(t, v.Update([]byte(g)), "v%d rejected valid update", ver)
		}
		for _, b := range bad {
			assert.Error(t, v.Update([]byte(b)), "v%d accepted invalid update %s", ver, b)
		}
	}
}

func TestNilValidatorAcceptsEverything(t *testing.T) {
	var v *acpschema.Validator
	if assert.NoError(t, v.Update([]byte(`7`)), "a nil Validator rejected a document") {
		if assert.NoError(t, v.Notification([]byte(`{`)), "a nil Validator rejected a document") {
			if assert.NoError(t, v.Message(nil), "a nil Validator rejected a document") {
				assert.Equal(t, 0, v.Version(), "a nil Validator rejected a document")
			}
		}
	}
}

// fakeSchema creates dir/v1/schema.json and dir/v2/schema.json.
func fakeSchema(t *testing.T, dir string) string {
	t.Helper()
	for _, v := range []string{"v1", "v2"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, v), 0o755), "os.MkdirAll")
		require.NoError(t, os.WriteFile(filepath.Join(dir, v, "schema.json"), []byte(`{}`), 0o644), "os.WriteFile")
	}
	return dir
}

func sdkSchema(prefix string) string {
	return filepath.Join(prefix, "node_modules", "@agentclientprotocol", "sdk", "schema")
}

// lookupSandbox points the user cache into a temporary directory and moves
// into a fresh checkout of the module there (a go.mod and test/interop),
// with no schema installed anywhere yet.
func lookupSandbox(t *testing.T, module string) (root, cachePrefix string) {
	t.Helper()
	tmp := t.TempDir()
	t.Setenv(acpschema.EnvDir, "")
	t.Setenv("XDG_CACHE_HOME", filepath.Join(tmp, "cache")) // Linux and the BSDs
	t.Setenv("HOME", filepath.Join(tmp, "home"))            // macOS: $HOME/Library/Caches
	t.Setenv("LocalAppData", filepath.Join(tmp, "local"))   // Windows
	root = filepath.Join(tmp, "checkout")
	require.NoError(t, os.MkdirAll(filepath.Join(root, "cmd", "x"), 0o755), "filepath.Join")
	require.NoError(t, os.WriteFile(filepath.Join(root, "go.mod"), []byte("// a checkout\nmodule "+module+"\n\ngo 1.26\n"), 0o644), "os.WriteFile")
	t.Chdir(filepath.Join(root, "cmd", "x"))
	prefix, err := acpschema.CachePrefix()
	require.NoError(t, err, "acpschema.CachePrefix")
	require.True(t, strings.HasPrefix(prefix, tmp), "user cache %s is not in the sandbox %s", prefix, tmp)
	return root, prefix
}

func TestDirLooksInTheEnvironmentThenTheCheckoutThenTheUserCache(t *testing.T) {
	root, prefix := lookupSandbox(t, "github.com/acpcompact/acpcompact")
	inCheckout := sdkSchema(filepath.Join(root, "test", "interop"))
	inCache := sdkSchema(prefix)

	_, err := acpschema.Dir()
	var missing *acpschema.MissingError
	require.ErrorIs(t, err, acpschema.ErrSchemaMissing, "nothing installed: got %v", err)
	require.ErrorAs(t, err, &missing, "nothing installed: got %v", err)
	if assert.Len(t, missing.Looked, 2, "looked in") {
		if assert.Equal(t, inCheckout, missing.Looked[0].Dir, "looked in") {
			assert.Equal(t, inCache, missing.Looked[1].Dir, "looked in")
		}
	}
	for _, p := range []string{inCheckout, inCache} {
		assert.ErrorContains(t, err, p, "error %q does not name %s", err, p)
	}

	fakeSchema(t, inCache)
	l, err := acpschema.Locate()
	if assert.NoError(t, err, "user cache only: got %+v, %v", l, err) {
		if assert.Equal(t, inCache, l.Dir, "user cache only: got %+v, %v", l, err) {
			assert.Equal(t, "user cache", l.Source, "user cache only: got %+v, %v", l, err)
		}
	}
	fakeSchema(t, inCheckout)
	l, err = acpschema.Locate()
	if assert.NoError(t, err, "checkout and user cache (pinned by its lock file)") {
		if assert.Equal(t, inCheckout, l.Dir, "checkout and user cache (pinned by its lock file)") {
			assert.Equal(t, "checkout", l.Source, "checkout and user cache (pinned by its lock file)")
		}
	}
	env := fakeSchema(t, filepath.Join(t.TempDir(), "schema"))
	t.Setenv(acpschema.EnvDir, env)
	l, err = acpschema.Locate()
	if assert.NoError(t, err, "%s set: got %+v, %v", acpschema.EnvDir, l, err) {
		if assert.Equal(t, env, l.Dir, "%s set: got %+v, %v", acpschema.EnvDir, l, err) {
			assert.Equal(t, acpschema.EnvDir, l.Source, "%s set: got %+v, %v", acpschema.EnvDir, l, err)
		}
	}
}

func TestDirTrustsOnlyTheEnvironmentWhenItIsSet(t *testing.T) {
	root, prefix := lookupSandbox(t, "github.com/acpcompact/acpcompact")
	fakeSchema(t, sdkSchema(filepath.Join(root, "test", "interop")))
	fakeSchema(t, sdkSchema(prefix))
	bad := filepath.Join(t.TempDir(), "nonexistent")
	t.Setenv(acpschema.EnvDir, bad)
	_, err := acpschema.Dir()
	var missing *acpschema.MissingError
	if assert.ErrorAs(t, err, &missing, "acpschema.Dir with a bad "+acpschema.EnvDir) {
		if assert.Len(t, missing.Looked, 1, "missing.Looked") {
			assert.ErrorContains(t, err, acpschema.EnvDir+" "+bad+": no ", "the error names where it looked")
		}
	}
}

func TestDirIgnoresOtherModules(t *testing.T) {
	root, prefix := lookupSandbox(t, "example.com/other")
	fakeSchema(t, sdkSchema(filepath.Join(root, "test", "interop")))
	_, err := acpschema.Dir()
	var missing *acpschema.MissingError
	if assert.ErrorAs(t, err, &missing, "another module's test/interop") {
		if assert.Len(t, missing.Looked, 1, "another module's test/interop") {
			assert.Equal(t, sdkSchema(prefix), missing.Looked[0].Dir, "another module's test/interop")
		}
	}
	fakeSchema(t, sdkSchema(prefix))
	d, err := acpschema.Dir()
	if assert.NoError(t, err, "another module, user cache filled: got %q, %v", d, err) {
		assert.Equal(t, sdkSchema(prefix), d, "another module, user cache filled: got %q, %v", d, err)
	}
}

// The one-line command fills the user cache, quoted for the shell, with
// the package Dir then finds there.
func TestInstallCommandInstallsThePinnedPackageIntoTheUserCache(t *testing.T) {
	lookupSandbox(t, "example.com/other")
	t.Setenv("XDG_CACHE_HOME", filepath.Join(t.TempDir(), "it's cached"))
	t.Setenv("HOME", filepath.Join(t.TempDir(), "it's home"))
	t.Setenv("LocalAppData", filepath.Join(t.TempDir(), "it's local"))
	prefix, err := acpschema.CachePrefix()
	require.NoError(t, err, "acpschema.CachePrefix")
	quoted := "'" + strings.ReplaceAll(prefix, "'", `'\''`) + "'"
	assert.Equal(t, "npm install --prefix "+quoted+" "+acpschema.SDK, acpschema.InstallCommand(), "InstallCommand()")
}

func TestSDKIsThePinnedPackage(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "test", "interop", "package.json"))
	require.NoError(t, err, "os.ReadFile")
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	require.NoError(t, json.Unmarshal(raw, &pkg), "json.Unmarshal")
	name, version, _ := strings.Cut(strings.TrimPrefix(acpschema.SDK, "@"), "@")
	got := pkg.Dependencies["@"+name]
	assert.Equal(t, version, got, "test/interop/package.json pins @%s %q; acpschema.SDK is %q", name, got, acpschema.SDK)
}

// The README's one-line command installs the pinned package where Dir
// looks on Linux.
func TestReadmeInstallCommandIsThePinnedOne(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err, "os.ReadFile")
	want := `npm install --prefix "${XDG_CACHE_HOME:-$HOME/.cache}/acpcompact/schema" ` + acpschema.SDK + "\n"
	assert.Contains(t, string(raw), want, "README.md lacks the install command %q", want)
}
