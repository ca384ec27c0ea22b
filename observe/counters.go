package observe

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/acpcompact/acpcompact/protocol"
)

// Counters is an in-memory Metrics, for tests and for printing a summary
// at the end of a demo. The zero value is ready to use and it is safe for
// concurrent use.
type Counters struct {
	mu sync.Mutex
	s  Snapshot
}

var _ Metrics = (*Counters)(nil)

// Series names one status and trigger combination.
type Series struct {
	Status  protocol.Status
	Trigger protocol.Trigger
}

// DurationStats summarises the durations of one Series.
type DurationStats struct {
	Count int64
	Sum   time.Duration
	Max   time.Duration
}

// Snapshot is a copy of Counters at one moment. Maps with no entries are
// nil, so a test can compare a snapshot with a literal that lists only what
// it expects.
type Snapshot struct {
	Started       map[protocol.Trigger]int64
	Settled       map[Series]int64
	Durations     map[Series]DurationStats
	Replayed      map[Series]int64
	Abandoned     map[Abandonment]int64
	Dropped       map[DropReason]int64
	SummaryBytes  int64
	Withheld      int64
	Undeliverable int64
}

// Started implements Metrics.
func (c *Counters) Started(_ context.Context, trigger protocol.Trigger) {
	c.mu.Lock()
	defer c.mu.Unlock()
	inc(&c.s.Started, trigger, 1)
}

// Settled implements Metrics.
func (c *Counters) Settled(_ context.Context, status protocol.Status, trigger protocol.Trigger, d time.Duration) {
	k := Series{status, trigger}
	c.mu.Lock()
	defer c.mu.Unlock()
	inc(&c.s.Settled, k, 1)
	if c.s.Durations == nil {
		c.s.Durations = make(map[Series]DurationStats)
	}
	ds := c.s.Durations[k]
	ds.Count++
	ds.Sum += d
	ds.Max = max(ds.Max, d)
	c.s.Durations[k] = ds
}

// Replayed implements Metrics.
func (c *Counters) Replayed(_ context.Context, status protocol.Status, trigger protocol.Trigger) {
	c.mu.Lock()
	defer c.mu.Unlock()
	inc(&c.s.Replayed, Series{status, trigger}, 1)
}

// Abandoned implements Metrics.
func (c *Counters) Abandoned(_ context.Context, reason Abandonment) {
	c.mu.Lock()
	defer c.mu.Unlock()
	inc(&c.s.Abandoned, reason, 1)
}

// SummaryBytes implements Metrics.
func (c *Counters) SummaryBytes(_ context.Context, n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.s.SummaryBytes += n
}

// Withheld implements Metrics.
func (c *Counters) Withheld(context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.s.Withheld++
}

// Dropped implements Metrics.
func (c *Counters) Dropped(_ context.Context, reason DropReason) {
	c.mu.Lock()
	defer c.mu.Unlock()
	inc(&c.s.Dropped, reason, 1)
}

// Undeliverable implements Metrics.
func (c *Counters) Undeliverable(context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.s.Undeliverable++
}

// Snapshot returns a deep copy of the counts, consistent with itself: no
// update lands half-way through it.
func (c *Counters) Snapshot() Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.s
	s.Started = maps.Clone(s.Started)
	s.Settled = maps.Clone(s.Settled)
	s.Durations = maps.Clone(s.Durations)
	s.Replayed = maps.Clone(s.Replayed)
	s.Abandoned = maps.Clone(s.Abandoned)
	s.Dropped = maps.Clone(s.Dropped)
	return s
}

// String renders the snapshot one series per line, sorted, in a
// Prometheus-like text form. Durations appear as counts only: their sums
// differ from run to run, and a stable text is what makes it usable in
// golden files and examples.
func (s Snapshot) String() string {
	var lines []string
	add := func(name string, labels string, v int64) {
		if v == 0 {
			return
		}
		if labels != "" {
			name += "{" + labels + "}"
		}
		lines = append(lines, fmt.Sprintf("%s %d", name, v))
	}
	for t, v := range s.Started {
		add("started", fmt.Sprintf("trigger=%q", t), v)
	}
	for k, v := range s.Settled {
		add("settled", k.labels(), v)
	}
	for k, v := range s.Durations {
		add("duration_count", k.labels(), v.Count)
	}
	for k, v := range s.Replayed {
		add("replayed", k.labels(), v)
	}
	for r, v := range s.Abandoned {
		add("abandoned", fmt.Sprintf("reason=%q", r), v)
	}
	for r, v := range s.Dropped {
		add("dropped", fmt.Sprintf("reason=%q", r), v)
	}
	add("summary_bytes", "", s.SummaryBytes)
	add("withheld", "", s.Withheld)
	add("undeliverable", "", s.Undeliverable)
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

func (k Series) labels() string { return fmt.Sprintf("status=%q,trigger=%q", k.Status, k.Trigger) }

func inc[K comparable](m *map[K]int64, k K, n int64) {
	if *m == nil {
		*m = make(map[K]int64)
	}
	(*m)[k] += n
}
