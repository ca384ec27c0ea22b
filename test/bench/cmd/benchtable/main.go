// Command benchtable runs the module's benchmarks and prints one table
// with the ratios the performance targets are stated in.
//
//	go run ./test/bench/cmd/benchtable [-rounds 6] [-benchtime 500ms] [-flood.n 20000] [-o bench.txt]
//
// It compiles the test binaries of emitter, agentkit, proxy, sqlstore (the
// two stores side by side) and test/bench once, then runs every benchmark -rounds times, round-robin across the
// packages, so that a change in the machine's load hits baseline and
// candidate alike. Each ratio is computed within a round (the baseline and
// the candidate of the same round) and the table shows the median over the
// rounds, with the lowest and highest. The raw `go test -bench` output is
// written to -o, in the format benchstat reads.
//
// Nothing here is a pass/fail test: the table says which target a run met,
// and the exit code is 0 whatever the numbers (non-zero only when a
// benchmark could not run).
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// suite is one package's benchmarks.
type suite struct {
	pkg   string // import path relative to the module, e.g. ./emitter
	bench string // -test.bench regexp
	extra []string
	once  bool // deterministic: run in the first round only
	bin   string
}

func main() {
	rounds := flag.Int("rounds", 6, "how many times to run every benchmark")
	benchtime := flag.String("benchtime", "500ms", "-test.benchtime of the throughput benchmarks")
	floodTime := flag.String("flood.benchtime", "3x", "-test.benchtime of BenchmarkFlood (each op is one flood)")
	floodN := flag.Int("flood.n", 20_000, "chunks per flood")
	out := flag.String("o", "bench.txt", "where to write the raw go test -bench output")
	flag.Parse()

	root, err := moduleRoot()
	check(err)
	tmp, err := os.MkdirTemp("", "benchtable-")
	check(err)
	defer os.RemoveAll(tmp)

	suites := []*suite{
		{pkg: "./emitter", bench: "^Benchmark(Chunk|ChunkAllocs|Lifecycle|SettleAll)$", extra: []string{"-test.benchtime", *benchtime}},
		{pkg: "./emitter", bench: "^BenchmarkOpenCompactionMemory$", extra: []string{"-test.benchtime", "1x"}, once: true},
		{pkg: "./agentkit", bench: "^Benchmark(Notify|Chunk)$", extra: []string{"-test.benchtime", *benchtime}},
		{pkg: "./proxy", bench: "^BenchmarkProxy$", extra: []string{"-test.benchtime", *benchtime}},
		{pkg: "./audit", bench: "^BenchmarkAudit$", extra: []string{"-test.benchtime", "2x"}},
		{pkg: "./test/bench", bench: "^BenchmarkFlood$", extra: []string{"-test.benchtime", *floodTime, "-flood.n", strconv.Itoa(*floodN)}},
		// The kit's two stores side by side (docs/records.md).
		{pkg: "./sqlstore", bench: "^BenchmarkStore$", extra: []string{"-test.benchtime", *benchtime}},
	}
	var missing []string
	bins := map[string]string{}
	for _, s := range suites {
		if b, ok := bins[s.pkg]; ok {
			s.bin = b
			continue
		}
		bin := filepath.Join(tmp, strings.ReplaceAll(strings.Trim(s.pkg, "./"), "/", "_")+".test")
		cmd := exec.Command("go", "test", "-c", "-o", bin, s.pkg)
		cmd.Dir = root
		if msg, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "benchtable: %s does not build, its benchmarks are left out:\n%s\n", s.pkg, msg)
			missing = append(missing, s.pkg)
			bins[s.pkg] = ""
			continue
		}
		s.bin, bins[s.pkg] = bin, bin
	}

	raw, err := os.Create(*out)
	check(err)
	defer raw.Close()
	res := newResults()
	start := time.Now()
	failed := false
	for r := range *rounds {
		fmt.Fprintf(os.Stderr, "benchtable: round %d of %d (%s)\n", r+1, *rounds, time.Since(start).Round(time.Second))
		for _, s := range suites {
			if s.bin == "" || (s.once && r > 0) {
				continue
			}
			args := append([]string{"-test.run", "^$", "-test.bench", s.bench, "-test.benchmem"}, s.extra...)
			cmd := exec.Command(s.bin, args...)
			cmd.Dir = filepath.Join(root, s.pkg)
			var stdout bytes.Buffer
			cmd.Stdout = io.MultiWriter(&stdout, raw)
			cmd.Stderr = os.Stderr
			if err := cmd.Run(); err != nil {
				fmt.Fprintf(os.Stderr, "benchtable: %s: %v\n%s\n", s.pkg, err, stdout.String())
				failed = true
			}
			res.parse(r, strings.Trim(s.pkg, "./"), stdout.String())
		}
	}
	res.print(os.Stdout, missing, *floodN)
	fmt.Printf("\nraw output: %s (benchstat %s summarises it)\n", *out, *out)
	fmt.Printf("took %s\n", time.Since(start).Round(time.Second))
	if failed {
		os.Exit(1)
	}
}

// results holds every measurement: per benchmark, per round, per unit.
type results struct {
	runs  map[string][]map[string]float64 // "pkg Benchmark/sub" -> one metrics map per run
	round map[string][]int                // the round of each run
	skips map[string]string
}

func newResults() *results {
	return &results{runs: map[string][]map[string]float64{}, round: map[string][]int{}, skips: map[string]string{}}
}

var (
	benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+(\d+)\s+(.*)$`)
	skipLine  = regexp.MustCompile(`^\s*--- SKIP: (Benchmark\S+)`)
	skipWhy   = regexp.MustCompile(`\.go:\d+: (.*)$`)
)

func (r *results) parse(round int, pkg, out string) {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if m := skipLine.FindStringSubmatch(l); m != nil {
			why := "skipped"
			if i+1 < len(lines) {
				if w := skipWhy.FindStringSubmatch(lines[i+1]); w != nil {
					why = w[1]
				}
			}
			r.skips[pkg+" "+m[1]] = why
			continue
		}
		m := benchLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		f := strings.Fields(m[3])
		metrics := map[string]float64{}
		for j := 0; j+1 < len(f); j += 2 {
			v, err := strconv.ParseFloat(f[j], 64)
			if err == nil {
				metrics[f[j+1]] = v
			}
		}
		key := pkg + " " + m[1]
		r.runs[key] = append(r.runs[key], metrics)
		r.round[key] = append(r.round[key], round)
	}
}

// values returns a metric of a benchmark across its runs.
func (r *results) values(key, unit string) []float64 {
	var out []float64
	for _, m := range r.runs[key] {
		if v, ok := m[unit]; ok {
			out = append(out, v)
		}
	}
	return out
}

// byRound returns the metric of a benchmark in each round.
func (r *results) byRound(key, unit string) map[int]float64 {
	out := map[int]float64{}
	for i, m := range r.runs[key] {
		if v, ok := m[unit]; ok {
			out[r.round[key][i]] = v
		}
	}
	return out
}

// ratio is num/den per round; throughput ratios pass the baseline's ns/op
// as num (candidate throughput over baseline throughput).
func (r *results) ratio(numKey, numUnit, denKey, denUnit string) []float64 {
	num, den := r.byRound(numKey, numUnit), r.byRound(denKey, denUnit)
	var out []float64
	for round, n := range num {
		if d, ok := den[round]; ok && d != 0 {
			out = append(out, n/d)
		}
	}
	return out
}

type stat struct{ med, lo, hi float64 }

func summarize(v []float64) (stat, bool) {
	if len(v) == 0 {
		return stat{}, false
	}
	s := slices.Clone(v)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return stat{med, s[0], s[len(s)-1]}, true
}

func (r *results) print(w io.Writer, missing []string, floodN int) {
	fmt.Fprintf(w, "machine: %d CPUs (nproc), %s, %s %s/%s, load average %s\n\n",
		runtime.NumCPU(), cpuModel(), runtime.Version(), runtime.GOOS, runtime.GOARCH, loadAvg())

	fmt.Fprintf(w, "%-55s %14s %12s %10s %9s  %s\n", "benchmark (median of rounds)", "ns/op", "per second", "B/op", "allocs/op", "other")
	keys := make([]string, 0, len(r.runs))
	for k := range r.runs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		ns, _ := summarize(r.values(k, "ns/op"))
		b, _ := summarize(r.values(k, "B/op"))
		a, _ := summarize(r.values(k, "allocs/op"))
		var other []string
		for unit := range r.runs[k][0] {
			switch unit {
			case "ns/op", "B/op", "allocs/op", "MB/s":
				continue
			}
			s, _ := summarize(r.values(k, unit))
			other = append(other, fmt.Sprintf("%s %s", human(s.med), unit))
		}
		slices.Sort(other)
		perSec := ""
		if ns.med > 0 {
			perSec = human(1e9 / ns.med)
		}
		fmt.Fprintf(w, "%-55s %14s %12s %10s %9s  %s\n", k, human(ns.med), perSec, human(b.med), human(a.med), strings.Join(other, ", "))
	}
	for k, why := range r.skips {
		fmt.Fprintf(w, "%-55s SKIPPED: %s\n", k, why)
	}
	for _, p := range missing {
		fmt.Fprintf(w, "%-55s NOT RUN: the package does not build\n", p)
	}

	fmt.Fprintf(w, "\n%-66s %8s %17s  %-8s %s\n", "ratio (per round; median, [min, max])", "value", "", "target", "")
	row := func(name string, v []float64, target string, ok func(float64) bool) {
		s, has := summarize(v)
		if !has {
			fmt.Fprintf(w, "%-66s %8s %17s  %-8s %s\n", name, "n/a", "", target, "NOT MEASURED")
			return
		}
		verdict := "met"
		if ok != nil && !ok(s.med) {
			verdict = "MISSED"
		}
		if ok == nil {
			verdict = ""
		}
		fmt.Fprintf(w, "%-66s %8s [%6s, %6s]  %-8s %s\n", name, fmtRatio(s.med), fmtRatio(s.lo), fmtRatio(s.hi), target, verdict)
	}
	atLeast := func(x float64) func(float64) bool { return func(v float64) bool { return v >= x } }
	atMost := func(x float64) func(float64) bool { return func(v float64) bool { return v <= x } }

	row("Notify middleware/raw throughput (pass-through updates)",
		r.ratio("agentkit BenchmarkNotify/raw", "ns/op", "agentkit BenchmarkNotify/middleware", "ns/op"), ">= 0.97", atLeast(0.97))
	row("Notify middleware-stream/raw throughput (agentkit.NewStream)",
		r.ratio("agentkit BenchmarkNotify/raw", "ns/op", "agentkit BenchmarkNotify/middleware-stream", "ns/op"), "", nil)
	row("Chunk emitter/raw throughput (agentkit: kit vs bare jsonrpc2)",
		r.ratio("agentkit BenchmarkChunk/raw", "ns/op", "agentkit BenchmarkChunk/emitter", "ns/op"), ">= 0.90", atLeast(0.90))
	row("Chunk emitter-stream/raw throughput (agentkit.NewStream)",
		r.ratio("agentkit BenchmarkChunk/raw", "ns/op", "agentkit BenchmarkChunk/emitter-stream", "ns/op"), "", nil)
	row("Chunk emitter/raw throughput (emitter alone, same encoder and pipe)",
		r.ratio("emitter BenchmarkChunk/raw", "ns/op", "emitter BenchmarkChunk/emitter", "ns/op"), ">= 0.90", atLeast(0.90))
	row("emitter allocs per chunk beyond JSON encoding (emitter-encode)",
		diff(r.values("emitter BenchmarkChunkAllocs/emitter", "allocs/op"), r.values("emitter BenchmarkChunkAllocs/encode", "allocs/op")), "<= 2", atMost(2))
	row("emitter allocs per chunk, no encoding at all (nop notifier)",
		r.values("emitter BenchmarkChunkAllocs/nop", "allocs/op"), "<= 2", atMost(2))
	row("bytes per open compaction (100,000 sessions)",
		r.values("emitter BenchmarkOpenCompactionMemory/idle", "B/open-compaction"), "<= 512", atMost(512))
	row("bytes per open compaction after streaming 8 KiB into each",
		r.values("emitter BenchmarkOpenCompactionMemory/streamed", "B/open-compaction"), "<= 512", atMost(512))
	row("SettleAll ns per compaction (10,000 in 1,000 sessions)",
		scale(r.values("emitter BenchmarkSettleAll", "ns/op"), 1.0/10_000), "", nil)
	row("Proxy proxy/direct throughput (pass-through updates)",
		r.ratio("proxy BenchmarkProxy/direct", "ns/op", "proxy BenchmarkProxy/proxy", "ns/op"), ">= 0.80", atLeast(0.80))
	row("Proxy proxy-compaction/direct throughput (summary chunks)",
		r.ratio("proxy BenchmarkProxy/direct", "ns/op", "proxy BenchmarkProxy/proxy-compaction", "ns/op"), "", nil)
	row(fmt.Sprintf("Flood chunks/s scenario agent (N=%d)", floodN), r.values("test/bench BenchmarkFlood/scenario", "chunks/s"), "", nil)
	row(fmt.Sprintf("Flood chunks/s TypeScript SDK agent (N=%d)", floodN), r.values("test/bench BenchmarkFlood/tsagent", "chunks/s"), "", nil)
	row("Flood scenario/tsagent chunks/s",
		r.ratio("test/bench BenchmarkFlood/scenario", "chunks/s", "test/bench BenchmarkFlood/tsagent", "chunks/s"), ">= 5", atLeast(5))
	row("Audit MB/s of history: add (extract every reference)",
		r.values("audit BenchmarkAudit/add", "MB/s"), "", nil)
	row("Audit cost: add / JSON decode of the same history (ns/ns)",
		r.ratio("audit BenchmarkAudit/add", "ns/op", "audit BenchmarkAudit/decode", "ns/op"), "", nil)
	row("Audit cost: check a 2% summary / add (ns/ns)",
		r.ratio("audit BenchmarkAudit/check", "ns/op", "audit BenchmarkAudit/add", "ns/op"), "", nil)
	row("Audit cost: follow the wire lines / JSON decode (ns/ns)",
		r.ratio("audit BenchmarkAudit/follow", "ns/op", "audit BenchmarkAudit/decode", "ns/op"), "", nil)
	row("Audit cost: add / a tokenizer loop over the same bytes (ns/ns)",
		r.ratio("audit BenchmarkAudit/add", "ns/op", "audit BenchmarkAudit/tokens", "ns/op"), "", nil)
	row("Audit cost: add / bytes.Count over the same bytes (ns/ns)",
		r.ratio("audit BenchmarkAudit/add", "ns/op", "audit BenchmarkAudit/scan", "ns/op"), "", nil)
	row("Store append sqlite/sessionlog time (default durability)",
		r.ratio("sqlstore BenchmarkStore/append/sqlite", "ns/op", "sqlstore BenchmarkStore/append/sessionlog", "ns/op"), "", nil)
	row("Store append sqlite-syncFull/sessionlog-syncEach time (a sync an append)",
		r.ratio("sqlstore BenchmarkStore/append/sqlite-syncFull", "ns/op", "sqlstore BenchmarkStore/append/sessionlog-syncEach", "ns/op"), "", nil)
	row("Store load of 10,000 entries sqlite/sessionlog time",
		r.ratio("sqlstore BenchmarkStore/load10k/sqlite", "ns/op", "sqlstore BenchmarkStore/load10k/sessionlog", "ns/op"), "", nil)
}

func diff(a, b []float64) []float64 {
	var out []float64
	for i := range min(len(a), len(b)) {
		out = append(out, a[i]-b[i])
	}
	return out
}

func scale(v []float64, f float64) []float64 {
	out := make([]float64, len(v))
	for i := range v {
		out[i] = v[i] * f
	}
	return out
}

func fmtRatio(v float64) string {
	if math.Abs(v) >= 1000 {
		return human(v)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// human prints v with three significant digits and a k/M suffix.
func human(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e7:
		return strconv.FormatFloat(v/1e6, 'f', 1, 64) + "M"
	case a >= 1e4:
		return strconv.FormatFloat(v/1e3, 'f', 1, 64) + "k"
	case a >= 100 || a == math.Trunc(a):
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

func cpuModel() string {
	out, err := exec.Command("lscpu").Output()
	if err == nil {
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "Model name" {
				return strings.TrimSpace(v)
			}
		}
	}
	return "unknown CPU"
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("run benchtable inside the acpcompact module")
	}
	return filepath.Dir(mod), nil
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(2)
	}
}
