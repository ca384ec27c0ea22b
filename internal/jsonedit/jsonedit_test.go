package jsonedit

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Unescape undoes encoding/json's HTML and JSONP escapes, and only those:
// the value it leaves reads the same, and is never longer.
func TestUnescapeUndoesOnlyTheEscapesEncodingJSONAdds(t *testing.T) {
	for _, s := range []string{"<a href=\"x&y\">", "line\u2028para\u2029", `\u003c as text`, "tab\tquote\"", "é\u0001", ""} {
		b, err := json.Marshal(map[string]string{"text": s, "key<>": s})
		require.NoError(t, err)
		got := Unescape(append([]byte(nil), b...))
		assert.LessOrEqual(t, len(got), len(b), "Unescape(%s) grew", b)
		var back map[string]string
		require.NoError(t, json.Unmarshal(got, &back), "Unescape(%s) = %s is not JSON", b, got)
		assert.Equal(t, map[string]string{"text": s, "key<>": s}, back, "Unescape(%s) = %s reads otherwise", b, got)
		if !strings.Contains(s, `\`) {
			assert.NotContains(t, string(got), `\u003c`, "an HTML escape is left in %s", got)
		}
	}
	assert.Equal(t, `{"a":"\\u003c"}`, string(Unescape([]byte(`{"a":"\\u003c"}`))), "an escaped backslash is not an escape")
	assert.Equal(t, `"\u00e9"`, string(Unescape([]byte(`"\u00e9"`))), "other escapes stay")
}

// Set makes the objects on its path where they are absent or null, keeps
// every other member's bytes, and leaves what is no object as it was.
func TestSet(t *testing.T) {
	cases := []struct {
		name, in, want string
		ok             bool
	}{
		{"absent", `{"a":1}`, `{"a":1,"_meta":{"r":{"k":true}}}`, true},
		{"null", `{"_meta":null}`, `{"_meta":{"r":{"k":true}}}`, true},
		{"kept members", `{"_meta":{"v":{"x":1e0},"r":{"t":"auto"}}}`, `{"_meta":{"v":{"x":1e0},"r":{"t":"auto","k":true}}}`, true},
		{"replaced", `{"_meta":{"r":{"k":false}}}`, `{"_meta":{"r":{"k":true}}}`, true},
		{"no object on the way", `{"_meta":{"r":"opaque"}}`, `{"_meta":{"r":"opaque"}}`, false},
		{"an array on the way", `{"_meta":[1]}`, `{"_meta":[1]}`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var obj map[string]json.RawMessage
			require.NoError(t, json.Unmarshal([]byte(c.in), &obj))
			assert.Equal(t, c.ok, Set(obj, json.RawMessage(`true`), "_meta", "r", "k"), "Set's answer")
			assert.JSONEq(t, c.want, string(Marshal(obj)), "the object after Set")
			if c.name == "kept members" {
				assert.Contains(t, string(Marshal(obj)), `1e0`, "a member's bytes kept")
			}
		})
	}
}
