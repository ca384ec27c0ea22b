package skim

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The benchmarks compare the two implementations side by side, in one
// run (see README.md in this directory for the table and the commands):
//
//	go test -run '^$' -bench . -benchmem -count 6 ./internal/skim/

var benchSink [][]byte

// reportCPU reports the CPU time per op since c0, a cpuNow reading.
func reportCPU(b *testing.B, c0 int64) {
	if c1 := cpuNow(); c0 >= 0 && c1 >= 0 {
		b.ReportMetric(float64(c1-c0)/float64(b.N), "cpu-ns/op")
	}
}

// BenchmarkPick: the proxy's agent path set picked from a 200-byte
// agent_message_chunk and from compaction_updates of 64 KiB and 64 MiB.
func BenchmarkPick(b *testing.B) {
	lines := benchLines()
	for _, im := range impls {
		b.Run(im.name, func(b *testing.B) {
			for _, l := range lines {
				b.Run(l.name, func(b *testing.B) {
					var p implPicker
					b.SetBytes(int64(len(l.msg)))
					b.ReportAllocs()
					c0 := cpuNow()
					for b.Loop() {
						v, err := im.pick(&p, l.msg, agentSet)
						if err != nil { // require only on failure: its t.Helper would be timed
							require.NoError(b, err, "im.pick")
						}
						benchSink = v
					}
					reportCPU(b, c0)
				})
			}
		})
	}
}

// benchLines are the lines of BenchmarkPick, built once.
var benchLines = sync.OnceValue(func() []benchLine {
	return []benchLine{{"200B", smallUpdate()}, {"64KiB", bigUpdate(64 << 10)}, {"64MiB", bigUpdate(64 << 20)}}
})

type benchLine struct {
	name string
	msg  []byte
}

// BenchmarkValidate: validation alone, the floor under any pick: the
// skimmer skipping the whole line as one value, and jsontext reading it
// with one ReadValue.
func BenchmarkValidate(b *testing.B) {
	for _, name := range []string{"hand", "jsontext"} {
		b.Run(name, func(b *testing.B) {
			for _, l := range benchLines() {
				b.Run(l.name, func(b *testing.B) {
					var r textReader
					b.SetBytes(int64(len(l.msg)))
					b.ReportAllocs()
					c0 := cpuNow()
					for b.Loop() {
						var err error
						if name == "hand" {
							s := skimmer{b: l.msg}
							err = s.value()
						} else {
							r.reset(l.msg)
							_, err = r.dec.ReadValue()
						}
						if err != nil { // require only on failure: its t.Helper would be timed
							require.NoError(b, err, "ReadValue")
						}
					}
					reportCPU(b, c0)
				})
			}
		})
	}
}

// BenchmarkDeep: a 20,000-deep array, refused at depth 10001 as
// encoding/json refuses it.
func BenchmarkDeep(b *testing.B) {
	msg := []byte(nested(20000, ""))
	for _, im := range impls {
		b.Run(im.name, func(b *testing.B) {
			var p implPicker
			b.ReportAllocs()
			c0 := cpuNow()
			for b.Loop() {
				_, err := im.pick(&p, msg, agentSet)
				if !errors.Is(err, ErrTooDeep) { // require only on failure: its t.Helper would be timed
					require.ErrorIs(b, err, ErrTooDeep, "pick of a too deep message")
				}
			}
			reportCPU(b, c0)
		})
	}
}

// BenchmarkDeepUnbounded: a Picker without the nesting limit reading a
// message whose member is nested 20,000 and 1,000,000 deep, in arrays and
// in objects: past depth 10000 the values are read by skipDeep.
func BenchmarkDeepUnbounded(b *testing.B) {
	for _, tc := range []struct {
		name  string
		value string
	}{
		{"arrays-20000", nested(20000, "")},
		{"arrays-1000000", nested(1000000, "")},
		{"objects-1000000", strings.Repeat(`{"a":`, 1000000) + "1" + strings.Repeat("}", 1000000)},
	} {
		msg := []byte(`{"params":{"update":{"sessionUpdate":"plan","_meta":` + tc.value + `}},"id":7}`)
		b.Run(tc.name, func(b *testing.B) { benchPicker(b, &Picker{Unbounded: true}, msg) })
	}
}

var headSink Head

// BenchmarkHead: ReadHead on the 200-byte line; scanHead is the kit's
// current non-validating head scanner (agentkit/internal/tap), for scale.
func BenchmarkHead(b *testing.B) {
	msg := smallUpdate()
	for _, im := range impls {
		b.Run(im.name, func(b *testing.B) {
			b.SetBytes(int64(len(msg)))
			b.ReportAllocs()
			c0 := cpuNow()
			for b.Loop() {
				h, err := im.head(msg)
				if err != nil || h.Method != "session/update" { // require only on failure: its t.Helper would be timed
					require.NoError(b, err, "head")
					require.Equal(b, "session/update", h.Method, "head method")
				}
				headSink = h
			}
			reportCPU(b, c0)
		})
	}
	b.Run("scanHead", func(b *testing.B) {
		b.SetBytes(int64(len(msg)))
		b.ReportAllocs()
		c0 := cpuNow()
		for b.Loop() {
			h, ok := scanHead(msg)
			if !ok || string(h.method) != "session/update" { // require only on failure: its t.Helper would be timed
				require.True(b, ok, "%v %v", h, ok)
				require.Equal(b, "session/update", string(h.method), "%v %v", h, ok)
			}
			headSink.HasID = h.id
		}
		reportCPU(b, c0)
	})
}

// TestBenchLines: the benchmark's lines are what they say.
func TestBenchLines(t *testing.T) {
	n := len(smallUpdate())
	assert.Equal(t, 200, n, "small line of %d bytes", n)
	for _, n := range []int{64 << 10, 64 << 20} {
		got := len(bigUpdate(n))
		if assert.GreaterOrEqual(t, got, n-300, "line of %d bytes for %d", got, n) {
			assert.LessOrEqual(t, got, n+300, "line of %d bytes for %d", got, n)
		}
	}
	assert.Contains(t, string(bigUpdate(64<<10)), `"compaction_update"`, "not a compaction_update")
}

var keySink string

// BenchmarkIDKey: the ids a host keys on every request and response.
func BenchmarkIDKey(b *testing.B) {
	for _, id := range []struct{ name, raw string }{
		{"int", `7`}, {"int6", `123456`}, {"negzero", `-0`}, {"frac", `2.5`}, {"exp", `1e3`},
		{"bigint", `12345678901234567890`}, {"string", `"prompt-7"`}, {"escaped", `"init-\u00e9"`},
	} {
		raw := []byte(id.raw)
		b.Run(id.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				keySink = IDKey(raw)
			}
		})
	}
}

var prefixSink Prefix

// BenchmarkPickPrefix: the proxy's agent path set read from the head of a
// line, as the proxy reads a line too long to read whole: the 200-byte
// agent_message_chunk whole, a 64 KiB compaction_update whole, and the
// first 64 KiB of a 1 MiB one (cut inside its summary).
func BenchmarkPickPrefix(b *testing.B) {
	for _, mode := range []struct {
		name string
		pick func([]byte, *Paths) (Prefix, error)
	}{{"bounded", PickPrefix}, {"unbounded", PickPrefixUnbounded}} {
		b.Run(mode.name, func(b *testing.B) {
			for _, l := range prefixLines() {
				b.Run(l.name, func(b *testing.B) {
					b.SetBytes(int64(len(l.msg)))
					b.ReportAllocs()
					c0 := cpuNow()
					for b.Loop() {
						pre, err := mode.pick(l.msg, agentSet)
						require.NoError(b, err, "mode.pick")
						prefixSink = pre
					}
					reportCPU(b, c0)
				})
			}
		})
	}
}

// prefixLines are the heads of BenchmarkPickPrefix, built once.
var prefixLines = sync.OnceValue(func() []benchLine {
	return []benchLine{{"200B", smallUpdate()}, {"64KiB", bigUpdate(64 << 10)}, {"64KiB-of-1MiB", bigUpdate(1 << 20)[:64<<10]}}
})

// BenchmarkPickLiterals: a line of about 200 literals (true, false, null) among
// small objects. value inlines lit with its word a constant, so that
// comparing it is a load: a call there made this line 20-30% slower.
func BenchmarkPickLiterals(b *testing.B) {
	msg := []byte(`{"jsonrpc":"2.0","id":3,"method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call","rawInput":[` +
		strings.Repeat(`true,false,null,{"a":true,"b":null},`, 40) + `null]}}}`)
	benchPicker(b, &Picker{}, msg)
}

// benchPicker measures p picking agentSet from msg.
func benchPicker(b *testing.B, p *Picker, msg []byte) {
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	c0 := cpuNow()
	for b.Loop() {
		v, err := p.Pick(msg, agentSet)
		require.NoError(b, err, "p.Pick")
		benchSink = v
	}
	reportCPU(b, c0)
}
