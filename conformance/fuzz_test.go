package conformance_test

import (
	"bytes"
	"encoding/json"
	"io"
	"path/filepath"
	"testing"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/stretchr/testify/require"
)

func FuzzReadTranscript(f *testing.F) {
	// More seeds live in testdata/fuzz/FuzzReadTranscript.
	f.Add([]byte("client {}\nagent {\"a\":1}\r\n# c\n\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		lines, errs := conformance.ReadTranscript(bytes.NewReader(in))
		total := bytes.Count(in, []byte("\n")) + 1
		prev := 0
		for _, l := range lines {
			require.Greater(t, l.N, prev, "line number %d after %d (of %d)", l.N, prev, total)
			require.LessOrEqual(t, l.N, total, "line number %d after %d (of %d)", l.N, prev, total)
			prev = l.N
			require.Contains(t, []conformance.Direction{conformance.FromClient, conformance.FromAgent}, l.Dir, "line %d: direction", l.N)
			var obj map[string]json.RawMessage
			err := json.Unmarshal(l.Raw, &obj)
			require.NoError(t, err, "line %d: raw %q is not a JSON object", l.N, l.Raw)
			require.NotNil(t, obj, "line %d: raw %q is not a JSON object", l.N, l.Raw)
		}
		for _, err := range errs {
			var le *conformance.LineError
			require.True(t, asLineError(err, &le), "error %v is not a LineError within 1..%d", err, total)
			require.GreaterOrEqual(t, le.N, 1, "error %v is not a LineError within 1..%d", err, total)
			require.LessOrEqual(t, le.N, total, "error %v is not a LineError within 1..%d", err, total)
		}
	})
}

// FuzzCheckTranscript runs the checker (plain and WithStrictReplay) and the
// reducer over arbitrary transcripts: neither may panic, every violation must point at a real line
// with a known rule, and a compaction never moves once placed.
func FuzzCheckTranscript(f *testing.F) {
	// The crafted transcripts are the seeds, without their comments: the
	// minimizer's cost grows with input size, and FuzzReadTranscript
	// already covers comment handling.
	files, _ := filepath.Glob(filepath.Join("testdata", "*.jsonl"))
	for _, name := range files {
		var seed []byte
		for _, l := range bytes.SplitAfter(readTestdata(f, filepath.Base(name)), []byte("\n")) {
			if t := bytes.TrimSpace(l); len(t) > 0 && t[0] != '#' {
				seed = append(seed, l...)
			}
		}
		f.Add(seed)
	}
	rules := []conformance.Rule{
		conformance.RuleTranscript, conformance.RuleMalformed, conformance.RuleProtocol,
		conformance.RuleCapability, conformance.RuleSettlement, conformance.RuleAfterTurn,
		conformance.RuleTerminal, conformance.RuleReplay, conformance.RuleCancel,
		conformance.RuleFallback, conformance.RuleSchema,
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		total := bytes.Count(in, []byte("\n")) + 1
		for _, opts := range [][]conformance.Option{nil, {conformance.WithStrictReplay()}} {
			vs, err := conformance.CheckTranscript(bytes.NewReader(in), opts...)
			require.NoError(t, err, "CheckTranscript on an in-memory reader")
			for i, v := range vs {
				require.GreaterOrEqual(t, v.Line, 1, "bad violation %+v (transcript of %d lines)", v, total)
				require.LessOrEqual(t, v.Line, total, "bad violation %+v (transcript of %d lines)", v, total)
				require.Contains(t, rules, v.Rule, "bad violation %+v (transcript of %d lines)", v, total)
				require.NotEmpty(t, v.Message, "bad violation %+v (transcript of %d lines)", v, total)
				if i > 0 {
					require.LessOrEqual(t, vs[i-1].Line, v.Line, "violations out of line order: %v then %v", vs[i-1], v)
				}
			}
		}

		lines, _ := conformance.ReadTranscript(bytes.NewReader(in))
		// Checking positions after every line costs lines x items, so
		// large inputs are checked at the end only.
		stepwise := len(lines) <= 64
		for _, version := range []int{1, 2} {
			r := conformance.NewReducer(version)
			placed := map[string]int{} // session + compaction ID -> position
			for _, l := range lines {
				if l.Dir != conformance.FromAgent {
					continue
				}
				_ = r.ApplyMessage(l.Raw)
				if stepwise {
					checkPlacement(t, r, placed, version, l.N)
				}
			}
			checkPlacement(t, r, placed, version, 0)
			for _, sid := range r.Sessions() {
				require.NoError(t, r.Render(io.Discard, sid), "r.Render")
			}
		}
	})
}

// checkPlacement fails if a compaction sits elsewhere than where it was
// first placed.
func checkPlacement(t *testing.T, r *conformance.Reducer, placed map[string]int, version, line int) {
	t.Helper()
	for _, sid := range r.Sessions() {
		for i, it := range r.Timeline(sid) {
			if it.Kind != conformance.KindCompaction {
				continue
			}
			key := sid + "\x00" + it.ID
			if at, ok := placed[key]; ok {
				require.Equal(t, at, i, "v%d line %d: compaction %q moved", version, line, it.ID)
			}

			placed[key] = i
		}
	}
}

func asLineError(err error, target **conformance.LineError) bool {
	le, ok := err.(*conformance.LineError)
	*target = le
	return ok
}
