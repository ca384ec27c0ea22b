package audit_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpcompact/acpcompact/audit"
	"github.com/acpcompact/acpcompact/conformance"
)

const peersDir = "../test/peers/testdata"

// follow runs the audit over transcripts read one after the other, as one
// connection's messages, and returns its reports.
func follow(t *testing.T, paths ...string) []audit.Report {
	t.Helper()
	f := audit.NewFollower()
	var out []audit.Report
	for _, p := range paths {
		file, err := os.Open(p)
		require.NoError(t, err)
		sc := conformance.NewScanner(file)
		for {
			l, err := sc.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err, "%s", p)
			side := audit.FromAgent
			if l.Dir == conformance.FromClient {
				side = audit.FromClient
			}
			out = append(out, f.Observe(side, fmt.Sprintf("line %d", l.N), l.Raw)...)
		}
		file.Close()
	}
	return append(out, f.Close()...)
}

// realRuns are the recordings of real agent releases, a session/load
// recording after the recording of the session it loads (same session ID),
// so that a continuation message is audited against the history it
// replaced.
func realRuns(t *testing.T) map[string][]string {
	files, err := filepath.Glob(filepath.Join(peersDir, "*", "*.jsonl"))
	require.NoError(t, err)
	runs := map[string][]string{}
	for _, f := range files {
		rel, _ := filepath.Rel(peersDir, f)
		base := filepath.Base(f)
		for _, m := range []string{"cap", "nocap"} {
			if base == "load-"+m+".jsonl" {
				runs[filepath.ToSlash(rel)] = []string{filepath.Join(filepath.Dir(f), "load-before-"+m+".jsonl"), f}
			}
		}
		if runs[filepath.ToSlash(rel)] == nil {
			runs[filepath.ToSlash(rel)] = []string{f}
		}
	}
	return runs
}

type label struct {
	File   string `json:"file"`
	Kind   string `json:"kind"`
	Value  string `json:"value"`
	Absent bool   `json:"absent"`
	Why    string `json:"why"`
}

// tally is a precision count per kind: losses reported, and those that are
// really absent.
type tally map[audit.Kind]*[2]int

func (t tally) precision(k audit.Kind) float64 {
	c := t[k]
	return float64(c[1]) / float64(c[0])
}

// judge matches every reported loss with its hand label and counts.
func judge(t *testing.T, set string, labels []label, reports map[string][]audit.Report) (tally, int) {
	t.Helper()
	byKey := map[string]label{}
	for _, l := range labels {
		byKey[l.File+"\x00"+l.Kind+"\x00"+l.Value] = l
	}
	used := map[string]bool{}
	got := tally{}
	summaries := 0
	for file, rs := range reports {
		summaries += len(rs)
		for _, r := range rs {
			for _, loss := range r.KnownLoss {
				k := file + "\x00" + string(loss.Kind) + "\x00" + loss.Value
				l, ok := byKey[k]
				if !assert.True(t, ok, "%s: %s: %s %q has no hand label in testdata/precision.json: look at the summary and label it", set, file, loss.Kind, loss.Value) {
					continue
				}
				used[k] = true
				if got[loss.Kind] == nil {
					got[loss.Kind] = &[2]int{}
				}
				got[loss.Kind][0]++
				if l.Absent {
					got[loss.Kind][1]++
				}
			}
		}
	}
	for k, l := range byKey {
		assert.True(t, used[k], "%s: the label of %s %s %q matches no reported loss: the audit changed; relabel", set, l.File, l.Kind, l.Value)
	}
	return got, summaries
}

// measuredPrecision is the table in docs/conformance.md ("Precision"):
// per set and kind, reported losses and those really absent. A change that
// reports a loss that is not absent lowers a ratio and fails here.
var measuredPrecision = map[string]map[audit.Kind][2]int{
	"real": {
		audit.KindURL: {5, 5},
	},
	"constructed": {
		audit.KindPath:      {9, 9},
		audit.KindURL:       {3, 2},
		audit.KindVersion:   {4, 4},
		audit.KindCommit:    {1, 1},
		audit.KindErrorCode: {3, 3},
		audit.KindRequest:   {1, 1},
		audit.KindPromise:   {1, 1},
	},
}

func TestPrecisionDoesNotDropBelowWhatWasMeasured(t *testing.T) {
	raw, err := os.ReadFile("testdata/precision.json")
	require.NoError(t, err)
	var labels struct {
		Real        []label `json:"real"`
		Constructed []label `json:"constructed"`
	}
	require.NoError(t, json.Unmarshal(raw, &labels))

	real := map[string][]audit.Report{}
	runs := realRuns(t)
	if len(runs) == 0 {
		t.Skipf("no recordings under %s", peersDir)
	}
	for name, paths := range runs {
		real[name] = follow(t, paths...)
	}
	constructed := map[string][]audit.Report{}
	files, err := filepath.Glob("testdata/constructed/*.jsonl")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		constructed[filepath.Base(f)] = follow(t, f)
	}

	for _, set := range []struct {
		name    string
		labels  []label
		reports map[string][]audit.Report
	}{{"real", labels.Real, real}, {"constructed", labels.Constructed, constructed}} {
		got, summaries := judge(t, set.name, set.labels, set.reports)
		require.Positive(t, summaries, "%s: no summary was audited", set.name)
		var rows []string
		for _, k := range audit.Kinds() {
			if c := got[k]; c != nil {
				rows = append(rows, fmt.Sprintf("%s %d/%d = %.0f%%", k, c[1], c[0], 100*got.precision(k)))
			}
		}
		t.Logf("%s: %d summaries audited; precision: %s", set.name, summaries, strings.Join(rows, ", "))
		want := measuredPrecision[set.name]
		for k, c := range got {
			w, ok := want[k]
			if !assert.True(t, ok, "%s: %s losses are reported now (%d) and the table has no row for them", set.name, k, c[0]) {
				continue
			}
			assert.GreaterOrEqual(t, got.precision(k), float64(w[1])/float64(w[0]),
				"%s: the precision of %s dropped: %d of %d reported losses are really absent, was %d of %d", set.name, k, c[1], c[0], w[1], w[0])
		}
		for k := range want {
			_, ok := got[k]
			assert.True(t, ok, "%s: no %s loss is reported any more; update the table", set.name, k)
		}
	}
}
