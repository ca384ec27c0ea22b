package acpsdk_test

import (
	"context"
	"testing"

	"github.com/acpcompact/acpcompact/agentkit"
	"github.com/acpcompact/acpcompact/agentkit/acpsdk"
	"github.com/acpcompact/acpcompact/agentkit/internal/kittest"
	"github.com/acpcompact/acpcompact/emitter"
	acp "github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The surface is agentkit's: acpsdk's Session and Option are its types,
// so code of either import path passes values to the other's functions.
var (
	_ *agentkit.Session                             = acpsdk.SessionFrom(context.Background(), "")
	_ func(context.Context, string) *acpsdk.Session = agentkit.SessionFrom
	_ []agentkit.Option                             = []acpsdk.Option{acpsdk.WithLogger(nil), agentkit.WithLogger(nil)}
	_ func(...agentkit.Option) *acpsdk.Kit          = acpsdk.New
	_ func(...emitter.Option) acpsdk.Option         = agentkit.WithEmitterOptions
)

// TestSentinelsAreAgentkits: acpsdk's sentinel errors and constants are
// agentkit's own values, so errors.Is matches either name.
func TestSentinelsAreAgentkits(t *testing.T) {
	for _, tc := range []struct{ acpsdk, agentkit error }{
		{acpsdk.ErrNotInitialized, agentkit.ErrNotInitialized},
		{acpsdk.ErrClosed, agentkit.ErrClosed},
		{acpsdk.ErrUnknownConn, agentkit.ErrUnknownConn},
	} {
		assert.Same(t, tc.agentkit, tc.acpsdk, "acpsdk's sentinel is not agentkit's")
	}
	assert.Equal(t, agentkit.DefaultCancelGrace, acpsdk.DefaultCancelGrace)
	assert.Equal(t, agentkit.CloseTimeout, acpsdk.CloseTimeout)
}

// TestAgentkitSessionFromReportsOnAnAcpsdkConnection: both kits bind their
// handlers' contexts with one key, so agentkit.SessionFrom (and Recover)
// finds an acpsdk connection: a compaction it starts in an SDK agent's
// Prompt reaches that connection's client.
func TestAgentkitSessionFromReportsOnAnAcpsdkConnection(t *testing.T) {
	r := newRig(t)
	errs := make(chan error, 1)
	a := &agent{prompt: func(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
		c, err := agentkit.SessionFrom(ctx, string(p.SessionId)).Start(ctx, emitter.WithID("cmp_1"))
		if err == nil {
			err = c.Complete(ctx)
		}
		errs <- err
		return endTurn()
	}}
	r.serve(a)
	r.Initialize(1, true)
	_, err := r.Client.Prompt(r.Ctx, session, nil)
	require.NoError(t, err)
	require.NoError(t, <-errs, "agentkit.SessionFrom in an acpsdk handler")
	evs := r.Finish(1)
	assert.Equal(t, []string{"in_progress", "completed"}, kittest.Statuses(evs, "cmp_1"))

	// Outside any handler, either SessionFrom refuses with the one sentinel.
	_, err = agentkit.SessionFrom(context.Background(), session).Start(context.Background())
	assert.ErrorIs(t, err, acpsdk.ErrUnknownConn, "a context no kit handler derived")
}
