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
