package kittest

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The shared tests of a kit's errors: its sentinels, where each is
// returned, and the name they give.

// otherKey is a context key of the tests' own.
type otherKey struct{}

// loadBeforeInitialize serves an agent that keeps its session/load
// handler's context, sends session/load before initialize, and returns the
// rig and that context: a kit handler's, on a connection not initialized
// yet.
func loadBeforeInitialize(t *testing.T, st Stack) (*Rig, context.Context) {
	t.Helper()
	ctxs := make(chan context.Context, 1)
	r := Serve(t, st, Config{}, &Agent{Load: func(ctx context.Context, _ Conn, _ string) error {
		ctxs <- ctx
		return nil
	}})
	require.NoError(t, r.Client.Conn.Call(r.Ctx, "session/load", map[string]any{"sessionId": SessionID, "cwd": "/", "mcpServers": []any{}}, nil))
	return r, <-ctxs
}

// SessionErrorsAreSentinels: before initialize a Session and Kit.Emitter
// fail with the kit's ErrNotInitialized, with a context no kit handler
// derived with ErrUnknownConn, and once the connection is closed, a
// Session got before or after, with ErrClosed.
func SessionErrorsAreSentinels(t *testing.T, st Stack) {
	e := st.Errors()
	r, handlerCtx := loadBeforeInitialize(t, st)
	ctx := context.Background()
	_, err := st.SessionFrom(handlerCtx, SessionID).Start(ctx)
	assert.ErrorIs(t, err, e.NotInitialized, "Start before initialize")
	_, err = r.Served.Conn.Emitter()
	assert.ErrorIs(t, err, e.NotInitialized, "Emitter before initialize")
	for _, c := range []context.Context{context.Background(), context.WithValue(ctx, otherKey{}, 1)} {
		_, err = st.SessionFrom(c, SessionID).Start(ctx)
		assert.ErrorIs(t, err, e.UnknownConn, "Start with a context no kit handler derived")
		_, err = st.SessionFrom(c, SessionID).Compaction("cmp_1")
		assert.ErrorIs(t, err, e.UnknownConn, "Compaction with a context no kit handler derived")
	}
	r.Initialize(1, true)
	held := st.SessionFrom(handlerCtx, SessionID)
	r.Close()
	_, err = held.Start(ctx)
	assert.ErrorIs(t, err, e.Closed, "after close, held session")
	_, err = st.SessionFrom(handlerCtx, SessionID).Start(ctx)
	assert.ErrorIs(t, err, e.Closed, "after close, new lookup")
}

// namesTheKit reports whether err's text starts with "agentkit: ", the
// one kit's name, and does not name its acpsdk adapter: the errors of both
// kits are agentkit's.
func namesTheKit(err error) bool {
	return strings.HasPrefix(err.Error(), "agentkit: ") && !strings.Contains(err.Error(), "acpsdk")
}

// ErrorsNameTheKit: a kit's errors, agentkit's and acpsdk's alike, name
// agentkit (the surface both share), and still wrap its sentinels.
func ErrorsNameTheKit(t *testing.T, st Stack) {
	e := st.Errors()
	for _, err := range []error{e.NotInitialized, e.Closed, e.UnknownConn} {
		assert.True(t, namesTheKit(err), "%q does not name agentkit (alone)", err)
	}
	r, handlerCtx := loadBeforeInitialize(t, st)
	ctx := context.Background()
	_, before := st.SessionFrom(handlerCtx, SessionID).Start(ctx)
	_, unknown := st.SessionFrom(ctx, SessionID).Start(ctx)
	r.Initialize(1, true)
	held := st.SessionFrom(handlerCtx, SessionID)
	r.Close()
	_, after := held.Start(ctx)
	for _, tc := range []struct{ err, want error }{{before, e.NotInitialized}, {unknown, e.UnknownConn}, {after, e.Closed}} {
		assert.ErrorIs(t, tc.err, tc.want)
		assert.True(t, namesTheKit(tc.err), "error %q names more than agentkit", tc.err)
	}
}
