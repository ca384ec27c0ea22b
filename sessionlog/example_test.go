package sessionlog_test

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/acpcompact/acpcompact/sessionlog"
)

// A runtime appends its messages and its compactions' records as they
// happen; a later process reads the history back for session/load. Here
// the process dies during the second compaction, which reads back failed.
func Example() {
	dir, _ := os.MkdirTemp("", "sessions")
	defer os.RemoveAll(dir)

	// The first process.
	store, _ := sessionlog.Open(dir)
	log, _ := store.Create("sess_1", map[string]string{"cwd": "/work"})
	_ = log.AppendMessage("msg_1", map[string]string{"role": "user", "text": "/compact"})
	c1 := emitter.Record{ID: "cmp_1", Status: protocol.InProgress, Trigger: protocol.Manual}
	_ = log.AppendRecord(c1) // started
	c1.Status, c1.Summary = protocol.Completed, []protocol.ContentBlock{protocol.Text("## Retained context")}
	_ = log.AppendRecord(c1) // settled
	_ = log.AppendMessage("msg_2", map[string]string{"role": "user", "text": "/compact slow"})
	_ = log.AppendRecord(emitter.Record{ID: "cmp_2", Status: protocol.InProgress, Trigger: protocol.Manual})
	// ... SIGKILL: cmp_2 never settles.

	// A new process, on session/load.
	store, _ = sessionlog.Open(dir)
	r, err := store.Read("sess_1")
	if err != nil {
		fmt.Println(err) // names the file and the line
		return
	}
	defer r.Close()
	for e, err := range r.Entries() {
		if err != nil {
			fmt.Println(err)
			return
		}
		switch e.Kind {
		case sessionlog.KindMessage:
			var m map[string]string
			_ = json.Unmarshal(e.Data, &m)
			fmt.Printf("message %s: %s\n", e.MessageID, m["text"])
		case sessionlog.KindCompaction: // replay it: emitter.Session.Replay(ctx, e.Record)
			fmt.Printf("compaction %s: %s %q\n", e.Record.ID, e.Record.Status, e.Record.Error)
		}
	}
	// Output:
	// message msg_1: /compact
	// compaction cmp_1: completed ""
	// message msg_2: /compact slow
	// compaction cmp_2: failed "the agent stopped before the compaction finished"
}
