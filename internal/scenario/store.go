package scenario

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/acpcompact/acpcompact/agentkit"
	"github.com/acpcompact/acpcompact/history"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/acpcompact/acpcompact/sessionlog"
	"github.com/sourcegraph/jsonrpc2"
)

// The agent writes no record code: the kit keeps each session's history
// in its store (agentkit.WithStore: the state directory's session logs,
// or, without one, the process's memory) and replays it on session/load
// (Session.ReplayHistory). The agent keeps its own state in memory (the
// messages its scripts summarize, the token count, the ID counters) and
// restores it from the same history when it loads a session it does not
// hold. Of its own it adds only the session's working directory, kept
// with Session.Keep.

// storedInfo is the data the agent keeps in a session's history.
type storedInfo struct {
	Cwd string `json:"cwd"`
}

// replay replays session sid's history to the client of ctx's connection
// (the kit replays only when the request asked for it: session/load, a v2
// session/resume with replayFrom) and returns the session, restored from
// its history when this process does not hold it. A session that another
// process serves, and a history that cannot be read, are the JSON-RPC
// errors session/load answers with.
func (a *Agent) replay(ctx context.Context, sid string) (*session, error) {
	ks := agentkit.SessionFrom(ctx, sid)
	if s := a.session(sid); s != nil {
		return s, a.storeError(sid, ks.ReplayHistory(ctx, nil))
	}
	a.restoring.Lock()
	defer a.restoring.Unlock()
	if s := a.session(sid); s != nil {
		return s, a.storeError(sid, ks.ReplayHistory(ctx, nil))
	}
	s := &session{a: a, id: sid, cwd: "/", tokens: startTokens, mark: newMark()}
	if err := ks.ReplayHistory(ctx, s.restore); err != nil {
		return nil, a.storeError(sid, err)
	}
	s.created, s.updated = time.Now(), time.Now()
	a.mu.Lock()
	a.sessions[s.id] = s
	a.order = append(a.order, s)
	a.mu.Unlock()
	a.log.Info("session restored", "session", s.id, "messages", len(s.entries))
	return s, nil
}

// restore takes one entry of the session's history into its state: its
// messages (the updates the kit recorded as the client saw them, a v1
// client's prompts among them), the token count a completed compaction
// left, the ID counters, the working directory. What it does not know it
// leaves, so a history written by a later agent still loads.
func (s *session) restore(e history.Entry) error {
	switch e.Kind {
	case history.Data:
		var info storedInfo
		if json.Unmarshal(e.Data, &info) == nil && info.Cwd != "" {
			s.cwd = info.Cwd
		}
	case history.Final:
		rec := e.Record
		if rec.Status == protocol.Completed && rec.Details != nil && rec.Details.TokensAfter > 0 {
			s.tokens = rec.Details.TokensAfter
		}
		s.nextCmp = max(s.nextCmp, idNumber(string(rec.ID)))
	case history.Update:
		var u struct {
			Kind      string          `json:"sessionUpdate"`
			MessageID string          `json:"messageId"`
			Content   json.RawMessage `json:"content"`
		}
		if json.Unmarshal(e.Update, &u) != nil {
			return nil
		}
		var r role
		switch u.Kind {
		case "user_message_chunk", "user_message":
			r = roleUser
		case "agent_message_chunk", "agent_message":
			r = roleAgent
		default:
			return nil
		}
		blocks := []json.RawMessage{u.Content}
		if strings.HasSuffix(u.Kind, "_message") {
			blocks = nil
			_ = json.Unmarshal(u.Content, &blocks)
		}
		if n := len(s.entries); n > 0 && s.entries[n-1].messageID == u.MessageID && s.entries[n-1].role == r && strings.HasSuffix(u.Kind, "_chunk") {
			s.entries[n-1].content = append(s.entries[n-1].content, blocks...)
		} else {
			s.entries = append(s.entries, entry{role: r, messageID: u.MessageID, content: blocks})
			if r == roleUser {
				if f := strings.Fields(firstText(blocks)); len(f) == 0 || f[0] != "/compact" {
					s.ordinary++
				}
			}
		}
		for _, b := range blocks {
			s.tokens += tokensPerEntry + int64(len(b))/4
		}
		s.nextMessage = max(s.nextMessage, idNumber(u.MessageID))
	}
	return nil
}

// storeError turns an error of the kit's history into session/load's
// answer: an unknown session for none, a session another process serves,
// or a state file that cannot be read, naming the file and the line.
func (a *Agent) storeError(sid string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, history.ErrNotFound):
		return errUnknownSession(sid)
	case errors.Is(err, history.ErrLocked):
		a.log.Warn("session not restored: another agent process serves it", "session", sid, "error", err)
		return errInUse(sid, cause(err))
	}
	a.log.Warn("session not restored", "session", sid, "error", err)
	return errStateFile(sid, cause(err))
}

// cause is the store's error inside one of the kit's (which wraps
// agentkit.ErrStore and it).
func cause(err error) error {
	if m, ok := err.(interface{ Unwrap() []error }); ok {
		if es := m.Unwrap(); len(es) == 2 && errors.Is(es[0], agentkit.ErrStore) {
			return es[1]
		}
	}
	return err
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
	return &jsonrpc2.Error{Code: jsonrpc2.CodeInternalError,
		Message: fmt.Sprintf("session %q is served by another agent process on this state directory (one process at a time): %v", sessionID, err)}
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
