// Package sessionlog persists what an ACP agent replays on session/load,
// across restarts of its process: each session's own messages and its
// compaction records (emitter.Record), one append-only file per session.
// That is its one job; what a message holds is the runtime's business.
// Why this format (measured against bbolt): docs/records.md.
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
//	log, err = store.Append(sessionID)               // session/load, in a later process: the writer's lock
//	r, err := store.Read(sessionID)                  // then the history
//	for e, err := range r.Entries() { ... }          // messages, and records to Session.Replay, in order
//
// A record is placed right after the message its Record.After names
// (emitter.After at Start), wherever the record is in the file: a final
// record is appended when the compaction settles, maybe after later
// messages. A record without After, or whose After names no message of
// the log, goes where its first entry (its start, or itself) is.
//
// # Crash safety: an interrupted compaction reads back as failed
//
// A runtime that appends a compaction's record when it starts (status
// in_progress, the handle's Compaction.Record right after Start) and
// again when it settles gets this guarantee: if the process dies in
// between (SIGKILL, a power loss), reading the log yields that compaction
// as failed, with the error text of ErrInterrupted and Entry.Interrupted
// set, at its place in the history. Nothing reads back in_progress.
// Failed rather than absent, because the client saw it start (see
// docs/records.md); a runtime that does not append starts gets "absent":
// only settled compactions have records.
//
// # Format
//
// A log is a UTF-8 JSON Lines file: a header line naming the format
// ("acpcompact-sessionlog") and its version (1), then one entry a line,
// each line beginning with its CRC-32C; lines of a kind this version does
// not know are skipped. The format is specified, line by line, in
// docs/records.md ("The session log format").
//
// # Errors
//
// Reading tells three kinds of bad file apart, each an *Error naming the
// file and the line, usable with errors.Is: ErrForeign (another format,
// or the log of another session), ErrVersion (a log or record version not
// read here) and ErrCorrupt (a checksum that does not match, a line that
// is not what its kind says). The header is judged in that order of
// evidence, version first: a header that checks out and names another
// version is ErrVersion whatever its other members look like; then a
// damaged line that says it is this format's log (or carries the checksum
// prefix and this session's ID) is ErrCorrupt; ErrForeign only when
// nothing says it is one. Store.Read checks the whole file before it
// returns, so an error comes before the first entry: a runtime answers
// session/load with an error, and sends no half history.
//
// # Torn final lines
//
// A process killed while it appends may leave a final line without its
// newline (a torn write: Linux may stop a write between pages on a fatal
// signal, a power loss may leave the end unwritten). Reading leaves bytes
// after the last newline out, and reports them: a WARN to the logger
// (WithLogger) naming the file and the byte count, and Reader.TornBytes.
// Store.Append, before it appends, keeps them aside and then cuts them
// off: they are appended, as one line, to <session ID>.jsonl.torn beside
// the log (synced before the cut, whatever the fsync policy), the cut is
// logged (WARN: the file, the byte count, the offset, the aside file),
// and every later Reader names that file (Reader.TornAside). Nothing a
// process wrote is lost by opening its log again. A line that ends with
// its newline and fails its checksum is corruption, wherever it is.
//
// A log cut exactly at a line boundary (a copy stopped early, a file
// system that lost the last whole lines) cannot be told from a shorter
// log: every line is whole and checks out, and nothing records how many
// lines there were. It reads as the history up to its last line, without
// an error or a report.
//
// # Durability: the fsync policy
//
// Each append is one pwrite(2) of one whole line at the log's end, so a
// crash of the process (a panic, SIGKILL) loses nothing that Append
// returned for. A crash of the machine may lose what the kernel had not yet written to disk;
// WithSync(SyncEach) fsyncs every append, and a new log and its directory
// entry before Create returns. The default, SyncNone, leaves write-back to
// the kernel (about 90 times as fast here: docs/records.md); after a power
// loss a log then typically loses its last entries rather than reading as
// corrupt, since file systems such as ext4 (data=ordered) write appended
// data before the size that covers it, and a torn end is ignored.
//
// # One writer a log
//
// A Log (Store.Create, Store.Append) holds its log's writer lock until
// Close: an advisory lock of the operating system on the file (flock(2)
// on Linux, macOS and the BSDs; LockFileEx on Windows, on a byte far past
// the end so that readers are not blocked). Another writer of that log,
// in another process or in this one, gets ErrLocked at once, naming the
// file; nothing waits for a lock. The lock ends with the Log's Close or
// with its process, however that ends (SIGKILL included), so a crash
// leaves no stale lock to clear. On platforms without such a lock (AIX,
// Plan 9, js/wasm, WASI) none is taken, and one writer at a time is the
// caller's agreement.
//
// A Reader takes no lock: it reads the complete lines the log had when
// Store.Read checked it, so a log may be read while its writer appends.
// A runtime that goes on with a session takes the lock first
// (Store.Append), then reads: two processes never both serve a session.
//
// # Concurrency and memory
//
// A Store, a Log and a Reader are safe for concurrent use. Appends to one
// Log are serialized, each line written whole.
//
// Reading streams: Store.Read makes one pass to check the file and index
// its compactions (a few words each), Reader.Entries a second, one entry
// at a time; memory is bounded by the largest line (WithMaxLine, 64 MiB by
// default) and the number of compactions, never by the history's size.
package sessionlog
