package acpschema_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acpcompact/acpcompact/internal/acpschema"
	"github.com/acpcompact/acpcompact/internal/acpschema/schematest"
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
			if err := v.Update([]byte(g)); err != nil {
				t.Errorf("v%d rejected valid update: %v", ver, err)
			}
		}
		for _, b := range bad {
			if err := v.Update([]byte(b)); err == nil {
				t.Errorf("v%d accepted invalid update %s", ver, b)
			}
		}
	}
}

func TestNilValidatorAcceptsEverything(t *testing.T) {
	var v *acpschema.Validator
	if v.Update([]byte(`7`)) != nil || v.Notification([]byte(`{`)) != nil || v.Message(nil) != nil || v.Version() != 0 {
		t.Error("a nil Validator rejected a document")
	}
}

// fakeSchema creates dir/v1/schema.json and dir/v2/schema.json.
func fakeSchema(t *testing.T, dir string) string {
	t.Helper()
	for _, v := range []string{"v1", "v2"} {
		if err := os.MkdirAll(filepath.Join(dir, v), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, v, "schema.json"), []byte(`{}`), 0o644); err != nil {
			t.Fatal(err)
		}
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
	if err := os.MkdirAll(filepath.Join(root, "cmd", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("// a checkout\nmodule "+module+"\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(filepath.Join(root, "cmd", "x"))
	prefix, err := acpschema.CachePrefix()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(prefix, tmp) {
		t.Fatalf("user cache %s is not in the sandbox %s", prefix, tmp)
	}
	return root, prefix
}

func TestDirLooksInTheEnvironmentThenTheCheckoutThenTheUserCache(t *testing.T) {
	root, prefix := lookupSandbox(t, "github.com/acpcompact/acpcompact")
	inCheckout := sdkSchema(filepath.Join(root, "test", "interop"))
	inCache := sdkSchema(prefix)

	_, err := acpschema.Dir()
	var missing *acpschema.MissingError
	if !errors.Is(err, acpschema.ErrSchemaMissing) || !errors.As(err, &missing) {
		t.Fatalf("nothing installed: got %v", err)
	}
	if len(missing.Looked) != 2 || missing.Looked[0].Dir != inCheckout || missing.Looked[1].Dir != inCache {
		t.Errorf("looked in %+v, want the checkout then the user cache", missing.Looked)
	}
	for _, p := range []string{inCheckout, inCache} {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not name %s", err, p)
		}
	}

	fakeSchema(t, inCache)
	if l, err := acpschema.Locate(); err != nil || l.Dir != inCache || l.Source != "user cache" {
		t.Errorf("user cache only: got %+v, %v", l, err)
	}
	fakeSchema(t, inCheckout)
	if l, err := acpschema.Locate(); err != nil || l.Dir != inCheckout || l.Source != "checkout" {
		t.Errorf("checkout and user cache: got %+v, %v, want the checkout (pinned by its lock file)", l, err)
	}
	env := fakeSchema(t, filepath.Join(t.TempDir(), "schema"))
	t.Setenv(acpschema.EnvDir, env)
	if l, err := acpschema.Locate(); err != nil || l.Dir != env || l.Source != acpschema.EnvDir {
		t.Errorf("%s set: got %+v, %v", acpschema.EnvDir, l, err)
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
	if !errors.As(err, &missing) || len(missing.Looked) != 1 || !strings.Contains(err.Error(), acpschema.EnvDir+" "+bad+": no ") {
		t.Errorf("got %v, want only %s=%s named", err, acpschema.EnvDir, bad)
	}
}

func TestDirIgnoresOtherModules(t *testing.T) {
	root, prefix := lookupSandbox(t, "example.com/other")
	fakeSchema(t, sdkSchema(filepath.Join(root, "test", "interop")))
	_, err := acpschema.Dir()
	var missing *acpschema.MissingError
	if !errors.As(err, &missing) || len(missing.Looked) != 1 || missing.Looked[0].Dir != sdkSchema(prefix) {
		t.Errorf("another module's test/interop: got %v, want only the user cache looked in", err)
	}
	fakeSchema(t, sdkSchema(prefix))
	if d, err := acpschema.Dir(); err != nil || d != sdkSchema(prefix) {
		t.Errorf("another module, user cache filled: got %q, %v", d, err)
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
	if err != nil {
		t.Fatal(err)
	}
	quoted := "'" + strings.ReplaceAll(prefix, "'", `'\''`) + "'"
	if got, want := acpschema.InstallCommand(), "npm install --prefix "+quoted+" "+acpschema.SDK; got != want {
		t.Errorf("InstallCommand() = %q, want %q", got, want)
	}
}

func TestSDKIsThePinnedPackage(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "test", "interop", "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	if err := json.Unmarshal(raw, &pkg); err != nil {
		t.Fatal(err)
	}
	name, version, _ := strings.Cut(strings.TrimPrefix(acpschema.SDK, "@"), "@")
	if got := pkg.Dependencies["@"+name]; got != version {
		t.Errorf("test/interop/package.json pins @%s %q; acpschema.SDK is %q", name, got, acpschema.SDK)
	}
}

// The README's one-line command installs the pinned package where Dir
// looks on Linux.
func TestReadmeInstallCommandIsThePinnedOne(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	want := `npm install --prefix "${XDG_CACHE_HOME:-$HOME/.cache}/acpcompact/schema" ` + acpschema.SDK + "\n"
	if !strings.Contains(string(raw), want) {
		t.Errorf("README.md lacks the install command %q", want)
	}
}
