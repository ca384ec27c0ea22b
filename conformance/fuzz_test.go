package conformance_test

import (
	"bytes"
	"encoding/json"
	"io"
	"path/filepath"
	"slices"
	"testing"

	"github.com/acpcompact/acpcompact/conformance"
)

func FuzzReadTranscript(f *testing.F) {
	// More seeds live in testdata/fuzz/FuzzReadTranscript.
	f.Add([]byte("client {}\nagent {\"a\":1}\r\n# c\n\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		lines, errs := conformance.ReadTranscript(bytes.NewReader(in))
		total := bytes.Count(in, []byte("\n")) + 1
		prev := 0
		for _, l := range lines {
			if l.N <= prev || l.N > total {
				t.Fatalf("line number %d after %d (of %d)", l.N, prev, total)
			}
			prev = l.N
			if l.Dir != conformance.FromClient && l.Dir != conformance.FromAgent {
				t.Fatalf("line %d: direction %v", l.N, l.Dir)
			}
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(l.Raw, &obj); err != nil || obj == nil {
				t.Fatalf("line %d: raw %q is not a JSON object: %v", l.N, l.Raw, err)
			}
		}
		for _, err := range errs {
			var le *conformance.LineError
			if !asLineError(err, &le) || le.N < 1 || le.N > total {
				t.Fatalf("error %v is not a LineError within 1..%d", err, total)
			}
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
			if err != nil {
				t.Fatalf("CheckTranscript on an in-memory reader: %v", err)
			}
			for i, v := range vs {
				if v.Line < 1 || v.Line > total || !slices.Contains(rules, v.Rule) || v.Message == "" {
					t.Fatalf("bad violation %+v (transcript of %d lines)", v, total)
				}
				if i > 0 && vs[i-1].Line > v.Line {
					t.Fatalf("violations out of line order: %v then %v", vs[i-1], v)
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
				if err := r.Render(io.Discard, sid); err != nil {
					t.Fatal(err)
				}
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
			if at, ok := placed[key]; ok && at != i {
				t.Fatalf("v%d line %d: compaction %q moved from %d to %d", version, line, it.ID, at, i)
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
