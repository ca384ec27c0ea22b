// Package storebench measures the session store's format against an
// embedded key-value store, to choose one (docs/records.md, "Sessions that survive
// a restart"): appends per second, and the time to load a session of
// 10,000 entries, for package sessionlog (JSON lines with a CRC-32C per
// line) and for go.etcd.io/bbolt (a B+tree in one memory-mapped file).
//
// It is a module of its own so that the candidates it measures are not
// dependencies of acpcompact:
//
//	cd test/storebench && go test -run '^$' -bench . -benchmem
package storebench

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/acpcompact/acpcompact/sessionlog"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// loadEntries is the size of the session the load benchmarks read.
const loadEntries = 10_000

// item is one entry of a plausible session.
type item struct {
	kind string // "message", "start" or "record"
	id   string
	data json.RawMessage
	rec  emitter.Record
}

// workload returns n entries: user and agent messages of about 250 bytes;
// every 40th entry begins a compaction, whose final record (a 2 KiB
// summary, its details) follows 1 to 3 entries later.
func workload(n int) []item {
	out := make([]item, 0, n)
	summary := strings.Repeat("- a retained fact about the conversation so far.\n", 42) // ~2 KiB
	pending := []item{}
	for i := 0; len(out) < n; i++ {
		if len(pending) > 0 && i%2 == 0 {
			out = append(out, pending[0])
			pending = pending[1:]
			continue
		}
		if i%40 == 39 {
			id := fmt.Sprintf("cmp_%d", i)
			start := emitter.Record{ID: protocol.ID(id), Status: protocol.InProgress, Trigger: protocol.Auto, Displayable: true}
			fin := start
			fin.Status = protocol.Completed
			fin.Summary = []protocol.ContentBlock{protocol.Text(summary)}
			fin.Details = &emitter.Details{Trigger: protocol.Auto, Status: protocol.Completed, TokensBefore: 150_000, TokensAfter: 6_000,
				ContextWindow: 200_000, DurationMs: 1200,
				Source:     &emitter.MessageRange{FirstMessageID: "msg_1", LastMessageID: fmt.Sprintf("msg_%d", i-1), Count: i - 1},
				Summarizer: &emitter.Summarizer{Model: "scenario-summarizer", PromptID: "scenario-compact-v1"}}
			out = append(out, item{kind: "start", id: id, rec: start})
			pending = append(pending, item{kind: "record", id: id, rec: fin})
			continue
		}
		role := "user"
		if i%2 == 1 {
			role = "agent"
		}
		text := fmt.Sprintf("message %d: %s", i, strings.Repeat("lorem ipsum dolor sit amet ", 7))
		data, _ := json.Marshal(map[string]any{"role": role, "content": []map[string]string{{"type": "text", "text": text}}})
		out = append(out, item{kind: "message", id: fmt.Sprintf("msg_%d", i), data: data})
	}
	return out[:n]
}

// candidate is one way to store a session.
type candidate interface {
	append(it item) error
	close() error
	size() int64
}

type jsonl struct {
	store *sessionlog.Store
	log   *sessionlog.Log
}

func newJSONL(dir string, sync bool) (*jsonl, error) {
	p := sessionlog.SyncNone
	if sync {
		p = sessionlog.SyncEach
	}
	s, err := sessionlog.Open(dir, sessionlog.WithSync(p))
	if err != nil {
		return nil, err
	}
	l, err := s.Create("sess_1", map[string]string{"cwd": "/work"})
	if err != nil {
		return nil, err
	}
	return &jsonl{store: s, log: l}, nil
}

func (j *jsonl) append(it item) error {
	if it.kind == "message" {
		return j.log.AppendMessage(it.id, it.data)
	}
	return j.log.AppendRecord(it.rec)
}

func (j *jsonl) close() error { return j.log.Close() }

func (j *jsonl) size() int64 {
	st, err := os.Stat(j.log.Path())
	if err != nil {
		return 0
	}
	return st.Size()
}

// boltStore keeps a session as a bucket of entries keyed by sequence
// number, each value the entry's JSON; a final record overwrites its
// start, so that iterating the bucket is the history. One transaction
// per append, as a session log appends one entry at a time.
type boltStore struct {
	db    *bolt.DB
	path  string
	seq   uint64
	start map[string]uint64
}

var bucket = []byte("sess_1")

func newBolt(dir string, sync bool) (*boltStore, error) {
	path := filepath.Join(dir, "sessions.db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoSync: !sync})
	if err != nil {
		return nil, err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucket)
		if err != nil {
			return err
		}
		return b.Put([]byte("header"), []byte(`{"format":"bbolt","session":"sess_1","info":{"cwd":"/work"}}`))
	})
	return &boltStore{db: db, path: path, start: map[string]uint64{}}, err
}

type boltValue struct {
	Kind   string          `json:"kind"`
	ID     string          `json:"id"`
	Data   json.RawMessage `json:"data,omitempty"`
	Record *emitter.Record `json:"record,omitempty"`
}

func (s *boltStore) append(it item) error {
	v := boltValue{Kind: it.kind, ID: it.id, Data: it.data}
	if it.kind != "message" {
		v.Record = &it.rec
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		seq, ok := s.start[it.id]
		if it.kind != "record" || !ok {
			s.seq++
			seq = s.seq
			if it.kind == "start" {
				s.start[it.id] = seq
			}
		}
		var k [8]byte
		binary.BigEndian.PutUint64(k[:], seq)
		return b.Put(k[:], raw)
	})
}

func (s *boltStore) close() error { return s.db.Close() }

func (s *boltStore) size() int64 {
	st, err := os.Stat(s.path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// loadJSONL reads a session back as the scenario agent does: every
// message's data and every record decoded.
func loadJSONL(dir string) (int, error) {
	s, err := sessionlog.Open(dir)
	if err != nil {
		return 0, err
	}
	r, err := s.Read("sess_1")
	if err != nil {
		return 0, err
	}
	defer r.Close()
	n := 0
	for e, err := range r.Entries() {
		if err != nil {
			return n, err
		}
		if e.Kind == sessionlog.KindMessage && len(e.Data) == 0 {
			return n, fmt.Errorf("message %s without data", e.MessageID)
		}
		n++
	}
	return n, nil
}

func loadBolt(dir string) (int, error) {
	db, err := bolt.Open(filepath.Join(dir, "sessions.db"), 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		return 0, err
	}
	defer db.Close()
	n := 0
	err = db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucket).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if string(k) == "header" {
				continue
			}
			var e boltValue
			if err := json.Unmarshal(v, &e); err != nil {
				return err
			}
			if e.Kind == "message" && len(e.Data) == 0 {
				return fmt.Errorf("message %s without data", e.ID)
			}
			n++
		}
		return nil
	})
	return n, err
}

var candidates = []struct {
	name string
	open func(dir string, sync bool) (candidate, error)
	load func(dir string) (int, error)
}{
	{"jsonl", func(d string, s bool) (candidate, error) { return newJSONL(d, s) }, loadJSONL},
	{"bbolt", func(d string, s bool) (candidate, error) { return newBolt(d, s) }, loadBolt},
}

// BenchmarkAppend appends the workload's entries one at a time; an op is
// one append (one line, or one transaction).
func BenchmarkAppend(b *testing.B) {
	items := workload(loadEntries)
	for _, sync := range []bool{false, true} {
		for _, c := range candidates {
			b.Run(fmt.Sprintf("%s/sync=%v", c.name, sync), func(b *testing.B) {
				st, err := c.open(b.TempDir(), sync)
				require.NoError(b, err)
				b.ResetTimer()
				for i := 0; b.Loop(); i++ {
					if err := st.append(items[i%len(items)]); err != nil {
						require.NoError(b, err)
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
				b.StopTimer()
				if err := st.close(); err != nil {
					require.NoError(b, err)
				}
			})
		}
	}
}

// BenchmarkLoad reads a session of 10,000 entries (without fsync, as
// Append writes them) from the page cache: open, check, decode every
// entry, close.
func BenchmarkLoad(b *testing.B) {
	items := workload(loadEntries)
	for _, c := range candidates {
		b.Run(c.name, func(b *testing.B) {
			dir := b.TempDir()
			st, err := c.open(dir, false)
			require.NoError(b, err)
			for _, it := range items {
				if err := st.append(it); err != nil {
					require.NoError(b, err)
				}
			}
			size := st.size()
			if err := st.close(); err != nil {
				require.NoError(b, err)
			}
			want := 0 // a start and its record are one entry
			for _, it := range items {
				if it.kind != "record" {
					want++
				}
			}
			b.ResetTimer()
			for b.Loop() {
				n, err := c.load(dir)
				require.NoError(b, err)
				require.Equal(b, want, n, "entries loaded")
			}
			b.ReportMetric(float64(size), "file-bytes")
		})
	}
}
