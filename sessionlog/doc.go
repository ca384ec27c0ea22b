// Package sessionlog persists what an ACP agent replays on session/load,
// across restarts of its process: each session's own messages and its
// compaction records (emitter.Record), one append-only file per session.
// That is its one job; what a message holds is the runtime's business.
//
// # Use
//
//	store, err := sessionlog.Open(dir)              // once per process
//	em := emitter.New(n, emitter.OnFinalRecord(     // every compaction's final record, once
//		func(ctx context.Context, sessionID string, rec emitter.Record) {
//			logOf(sessionID).AppendRecord(rec)
//		}))
//
//	log, err := store.Create(sessionID, info)        // session/new
//	log.AppendMessage(messageID, msg)                // each of the runtime's messages, as it happens
//	c, _ := s.Start(ctx, emitter.After(messageID))   // a compaction, after that message
//	log.AppendRecord(c.Record())                     // its start (in_progress): see "Crash safety"
//
//	r, err := store.Read(sessionID)                  // session/load, in a later process
//	for e, err := range r.Entries() { ... }          // messages, and records to Session.Replay, in order
//	log, err = store.Append(sessionID)               // the session goes on
//
// A record is placed among the messages by Record.After (emitter.After at
// Start: the ID of the message the compaction follows): right after that
// message, wherever the record is in the file, since a final record is
// appended when the compaction settles, which may be after later
// messages. A record without After, or whose After names no message of
// the log, goes where its first entry (its start, or itself) is in the
// file.
//
// # Crash safety: an interrupted compaction reads back as failed
//
// A runtime that appends a compaction's record when it starts (status
// in_progress, the handle's Compaction.Record right after Start) and
// again when it settles gets this guarantee: if the process dies in
// between (SIGKILL, a power loss), reading the log yields that compaction
// as failed, with the error text of ErrInterrupted and Entry.Interrupted
// set, at its place in the history. Nothing reads back in_progress.
//
// Failed rather than absent, because the client saw it start: a client that
// still shows the compaction from the dead connection gets, from the
// replay, a terminal update that settles it (a replayed record is a
// terminal-first update by ID), and the history says truthfully that a
// compaction was attempted and did not finish. A runtime that does not
// append starts gets "absent" instead: only settled compactions have
// records.
//
// # Format
//
// A log is a UTF-8 text file of JSON objects, one a line (JSON Lines), so
// that jq and grep read it. The first line is the header, naming the
// format ("acpcompact-sessionlog"), its version (1), the session and its
// creation time, and the runtime's own info (Create's argument). Every
// line, the header included, begins with its checksum:
//
//	{"crc":"221312f2","format":"acpcompact-sessionlog","version":1,"session":"sess_1","created":"2026-12-01T23:36:11.637Z","info":{"cwd":"/work"}}
//	{"crc":"4422912e","kind":"message","id":"msg_1","data":{"role":"user","text":"/compact"}}
//	{"crc":"3f51c1fa","kind":"start","id":"cmp_1","after":"msg_1","record":{"v":1,"compactionId":"cmp_1","status":"in_progress","trigger":"manual","after":"msg_1"}}
//	{"crc":"266af394","kind":"record","id":"cmp_1","after":"msg_1","record":{"v":1,"compactionId":"cmp_1","status":"completed","trigger":"manual","after":"msg_1","summary":[{"type":"text","text":"## Retained context"}]}}
//
// The checksum is the CRC-32C (Castagnoli) of the bytes that follow the
// `{"crc":"xxxxxxxx",` prefix on the line, up to and including its closing
// brace, in eight lowercase hex digits. The members come in this order,
// the payload ("data", "record") last; a record is the versioned JSON form
// of emitter.Record. Lines of a kind this version does not know are
// skipped, so a later writer may add kinds of its own.
//
// # Errors
//
// Reading tells three kinds of bad file apart, each an *Error naming the
// file and the line, usable with errors.Is:
//
//   - ErrForeign: not a session log at all (another format), or the log of
//     another session;
//   - ErrVersion: a session log of a version this package does not read,
//     or a record of a version the emitter does not read;
//   - ErrCorrupt: a session log damaged in the middle: a checksum that
//     does not match, a line that is not what its kind says.
//
// Store.Read reads and checks the whole file before it returns, so an
// error comes before the first entry is yielded: a runtime answers
// session/load with an error, and sends no half history.
//
// # Torn final line
//
// A process killed while it appends may leave a final line without its
// newline (Linux may stop a write to a file between pages on a fatal
// signal; a power loss may leave the end of a file unwritten). Bytes
// after the last newline are such a torn write: reading ignores them, and
// Store.Append cuts them off before it appends, so the next line starts
// clean. A line that ends with its newline and fails its checksum is
// corruption, wherever it is.
//
// # Durability: the fsync policy
//
// Each append is one write(2) of one whole line, so a crash of the process
// (a panic, SIGKILL) loses nothing that Append returned for: the kernel
// has the bytes. A crash of the machine (power loss, kernel panic) may
// lose what the kernel had not yet written to disk. WithSync(SyncEach)
// closes that too: every append is followed by fsync(2), and a new log
// (and the directory entry that names it) is synced before Create
// returns. The default, SyncNone, leaves write-back to the kernel; on
// this project's machine (ext4 on a virtual disk) it appends about 90
// times as fast as SyncEach, 3 µs against 270 µs an entry
// (test/storebench, and the README's "Sessions that survive a restart").
// After a power loss a log then typically loses its last entries rather
// than reading as corrupt: file systems such as ext4 (data=ordered, its
// default) write appended data before the size that covers it, and a torn
// end is ignored (above).
//
// # Concurrency and memory
//
// A Store, a Log and a Reader are safe for concurrent use. Appends to one
// Log are serialized, each line written whole. A session's log is
// appended by one process at a time: the package takes no lock across
// processes.
//
// Reading streams: Store.Read makes one pass over the file to check it
// and index its compactions (a few words per compaction, nothing of any
// message), and Reader.Entries a second, yielding one entry at a time.
// Memory is bounded by the largest line and the number of compactions,
// never by the size of the history. A line is at most WithMaxLine bytes
// (64 MiB by default).
package sessionlog
