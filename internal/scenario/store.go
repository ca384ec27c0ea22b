package scenario

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/acpcompact/acpcompact/sessionlog"
	"github.com/sourcegraph/jsonrpc2"
)

// What the agent keeps in a session's log (package sessionlog): the
// header's info, and each message's data. Compactions are emitter
// records, in sessionlog's own entries.
type (
	storedInfo struct {
		Cwd string `json:"cwd"`
	}
	storedMessage struct {
		Role    string            `json:"role"` // "user" or "agent"
		Content []json.RawMessage `json:"content"`
	}
)

func roleName(r role) string {
	if r == roleUser {
		return "user"
	}
	return "agent"
}

// appendMessageLocked writes a message to the session's log; s.mu must be
// held, so that the log's order is the history's.
func (s *session) appendMessageLocked(r role, id string, content []json.RawMessage) {
	if s.log == nil {
		return
	}
	if err := s.log.AppendMessage(id, storedMessage{Role: roleName(r), Content: content}); err != nil {
		s.a.log.Warn("message not persisted", "session", s.id, "message", id, "error", err)
	}
}

// appendRecordLocked writes a compaction's record, its start or its final
// record, to the session's log; s.mu must be held. A final record is
// written as soon as the emitter hands it over, once the compaction's
// terminal update is written; its place in the history is its
// Record.After, not its place in the file. Writing the longest one the
// agent makes, /compact flood 20000's 20,000 summary blocks, takes about
// 2 ms (sessionlog's BenchmarkAppendRecord).
func (s *session) appendRecordLocked(rec emitter.Record) {
	if s.log == nil {
		return
	}
	if err := s.log.AppendRecord(rec); err != nil {
		s.a.log.Warn("compaction record not persisted", "session", s.id, "compaction", rec.ID, "status", rec.Status, "error", err)
	}
}

// enter marks a handler that writes to the session's log as running; leave
// ends it, closing the log if the session was closed meanwhile.
func (s *session) enter() {
	s.mu.Lock()
	s.active++
	s.mu.Unlock()
}

func (s *session) leave() {
	s.mu.Lock()
	s.active--
	s.mu.Unlock()
	s.closeIfDone()
}

// closeIfDone closes the log of a closed session once nothing writes to it
// any more, and lets the agent forget it.
func (s *session) closeIfDone() {
	s.mu.Lock()
	wasOpen := s.log != nil
	s.closeLogLocked()
	closedNow := wasOpen && s.log == nil
	s.mu.Unlock()
	if closedNow {
		s.a.mu.Lock() // not under s.mu: Agent.list takes a.mu, then s.mu
		if s.a.closing[s.id] == s {
			delete(s.a.closing, s.id)
		}
		s.a.mu.Unlock()
	}
}

// closeLogLocked closes the log of a closed session once no handler
// writes to it.
func (s *session) closeLogLocked() {
	if !s.closed || s.active > 0 || s.log == nil {
		return
	}
	if err := s.log.Close(); err != nil {
		s.a.log.Warn("session log not closed cleanly", "session", s.id, "error", err)
	}
	s.log = nil
}

// restored returns the session sessionID from the state directory, read
// into memory and open for appending, or the error that session/load
// answers with: unknown session for none, a state file error naming the
// file for a log it cannot read.
func (a *Agent) restored(sessionID string) (*session, error) {
	if s := a.session(sessionID); s != nil {
		return s, nil
	}
	if a.store == nil {
		return nil, errUnknownSession(sessionID)
	}
	a.restoring.Lock()
	defer a.restoring.Unlock()
	if s := a.session(sessionID); s != nil {
		return s, nil
	}
	if a.isClosing(sessionID) {
		// Its log is still this process's, for the turn session/close
		// stopped: reopened now, it would lack that turn's end.
		return nil, &jsonrpc2.Error{Code: jsonrpc2.CodeInternalError,
			Message: fmt.Sprintf("session %q is still closing in this process (the turn session/close stopped is writing its end); load it again once that turn has ended", sessionID)}
	}
	s, err := a.restore(sessionID)
	if errors.Is(err, sessionlog.ErrNotFound) || errors.Is(err, sessionlog.ErrSessionID) {
		return nil, errUnknownSession(sessionID)
	}
	if errors.Is(err, sessionlog.ErrLocked) {
		a.log.Warn("session not restored: another agent process serves it", "session", sessionID, "error", err)
		return nil, errInUse(sessionID, err)
	}
	if err != nil {
		a.log.Warn("session not restored", "session", sessionID, "error", err)
		return nil, errStateFile(sessionID, err)
	}
	a.mu.Lock()
	a.sessions[s.id] = s
	a.order = append(a.order, s)
	a.mu.Unlock()
	a.log.Info("session restored", "session", s.id, "entries", len(s.entries), "file", s.log.Path())
	return s, nil
}

// errStateFile answers session/load for a session whose log cannot be
// read: the message names the file (and the line), and the data carries
// them too.
func errStateFile(sessionID string, err error) error {
	e := &jsonrpc2.Error{Code: jsonrpc2.CodeInternalError,
		Message: fmt.Sprintf("session %q cannot be loaded from its state file: %v", sessionID, err)}
	var fe *sessionlog.Error
	if errors.As(err, &fe) {
		e.SetError(map[string]any{"file": fe.Path, "line": fe.Line})
	}
	return e
}

// errInUse answers session/load for a session whose log another process
// holds (sessionlog.ErrLocked): two processes serving one session would
// mint the same IDs and lose each other's compactions.
func errInUse(sessionID string, err error) error {
	e := &jsonrpc2.Error{Code: jsonrpc2.CodeInternalError,
		Message: fmt.Sprintf("session %q is served by another agent process on this state directory (one process at a time): %v", sessionID, err)}
	return e
}

func (a *Agent) isClosing(sessionID string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.closing[sessionID] != nil
}

// restore reads a session's log into a new session. It opens the log for
// appending first, which takes its writer's lock (sessionlog.ErrLocked
// while another process serves the session) and keeps a torn final line
// aside before cutting it off, then reads the history.
func (a *Agent) restore(sessionID string) (s *session, err error) {
	l, err := a.store.Append(sessionID)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			l.Close()
		}
	}()
	r, err := a.store.Read(sessionID)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	h := r.Header()
	var info storedInfo
	if len(h.Info) > 0 {
		if err := json.Unmarshal(h.Info, &info); err != nil {
			return nil, &sessionlog.Error{Path: r.Path(), Line: 1, Kind: sessionlog.ErrForeign, Detail: "not a scenario-agent session", Err: err}
		}
	}
	s = &session{a: a, id: sessionID, cwd: info.Cwd, created: h.Created, updated: h.Created, tokens: startTokens, mark: newMark()}
	if s.cwd == "" {
		s.cwd = "/"
	}
	for e, err := range r.Entries() {
		if err != nil {
			return nil, err
		}
		switch e.Kind {
		case sessionlog.KindMessage:
			var m storedMessage
			if err := json.Unmarshal(e.Data, &m); err != nil || (m.Role != "user" && m.Role != "agent") || e.MessageID == "" {
				return nil, &sessionlog.Error{Path: r.Path(), Line: e.Line, Kind: sessionlog.ErrForeign, Detail: "not a scenario-agent message", Err: err}
			}
			rl := roleAgent
			if m.Role == "user" {
				rl = roleUser
				if f := strings.Fields(firstText(m.Content)); len(f) == 0 || f[0] != "/compact" {
					s.ordinary++
				}
			}
			s.entries = append(s.entries, entry{role: rl, messageID: e.MessageID, content: m.Content})
			for _, b := range m.Content {
				s.tokens += tokensPerEntry + int64(len(b))/4
			}
			s.nextMessage = max(s.nextMessage, idNumber(e.MessageID))
		case sessionlog.KindCompaction:
			rec := e.Record
			s.entries = append(s.entries, entry{comp: &compEntry{id: rec.ID, r: rec}})
			if rec.Status == protocol.Completed && rec.Details != nil && rec.Details.TokensAfter > 0 {
				s.tokens = rec.Details.TokensAfter
			}
			s.nextCmp = max(s.nextCmp, idNumber(string(rec.ID)))
		}
	}
	if st, err := os.Stat(r.Path()); err == nil {
		s.updated = st.ModTime()
	}
	s.log = l
	return s, nil
}

// idNumber returns N of an ID ending in _N (msg_user_3, cmp_7,
// cmp_3f9a2c1b_8), else 0.
func idNumber(id string) int {
	i := strings.LastIndexByte(id, '_')
	n, err := strconv.Atoi(id[i+1:])
	if err != nil || n < 0 {
		return 0
	}
	return n
}
