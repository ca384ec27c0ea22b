package conformance_test

import (
	"encoding/json"
	"testing"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/stretchr/testify/assert"
)

func TestIDKeyComparesJSONValues(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{`"init-é"`, `"init-\u00e9"`, true},
		{`"a<b&c"`, `"a\u003cb\u0026c"`, true},
		{`"p/3"`, `"p\/3"`, true},
		{`1`, `"1"`, false},
		{`1`, `1.0`, true},
		{`1`, `1e0`, true},
		{`1`, `10E-1`, true},
		{`120`, `1.2e+2`, true},
		{`0`, `-0`, true},
		{`0`, `0.000e5`, true},
		{`-3`, `3`, false},
		{`9007199254740993`, `9007199254740992`, false}, // equal as float64
		{`1e999999999999`, `1e999999999999`, true},      // no big arithmetic
		{`1e999999999999`, `1e999999999998`, false},
		{`true`, `"true"`, false},
		{`{"a":1,"b":2}`, `{ "b":2, "a":1 }`, true},
		{`[1]`, `[1.0]`, false}, // not ids; compared as written re-encoded
		{`"x"`, `"y"`, false},
	} {
		ka, kb := conformance.IDKey(json.RawMessage(tc.a)), conformance.IDKey(json.RawMessage(tc.b))
		assert.Equal(t, tc.same, ka == kb, "%s vs %s: keys %q", tc.a, tc.b, ka)
	}
}
