package acpsdk

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestKitAgentHasEveryOptionalMethodOfTheSDK reads the SDK's dispatch code
// for the methods it finds on an agent by type assertion: kitAgent, which
// the SDK holds in place of the host's agent, must have each of them, or
// the host's would be hidden.
func TestKitAgentHasEveryOptionalMethodOfTheSDK(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/coder/acp-go-sdk").Output()
	if err != nil {
		t.Skipf("the SDK's source is not at hand: %v", err)
	}
	dir := strings.TrimSpace(string(out))
	var src strings.Builder
	for _, name := range []string{"agent_gen.go", "extensions.go"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		src.Write(b)
	}
	var methods []string
	// a.agent.(interface { Name(...) ... })
	for _, m := range regexp.MustCompile(`a\.agent\.\(interface \{\s*(\w+)\(`).FindAllStringSubmatch(src.String(), -1) {
		methods = append(methods, m[1])
	}
	// a.agent.(AgentLoader), a.agent.(ExtensionMethodHandler)
	named := map[string]string{"AgentLoader": "LoadSession", "ExtensionMethodHandler": "HandleExtensionMethod"}
	for _, m := range regexp.MustCompile(`a\.agent\.\((\w+)\)`).FindAllStringSubmatch(src.String(), -1) {
		method, ok := named[m[1]]
		if !assert.True(t, ok, "the SDK asserts an agent to %s, which kitAgent does not know", m[1]) {
			continue
		}
		methods = append(methods, method)
	}
	require.GreaterOrEqual(t, len(methods), 18, "optional methods found in the SDK's source: %v", methods)
	kt := reflect.TypeFor[*kitAgent]()
	for _, m := range methods {
		_, ok := kt.MethodByName(m)
		assert.True(t, ok, "kitAgent lacks %s: an agent's %s would be hidden from the SDK", m, m)
	}
}
