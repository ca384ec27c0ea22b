package main

// The ACP agent around the runtime: plain acp-go-sdk code, the same
// without acpcompact (but for report and load, glue.go's).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/examples/runtime-agent/runtime"
	acp "github.com/coder/acp-go-sdk"
	"github.com/sourcegraph/jsonrpc2"
)

// agent is an acp.Agent that runs each prompt on the runtime.
type agent struct {
	rt *runtime.Runtime
	// record is the kit's Record, for what the runtime applies with no
	// turn to show it in.
	record func(context.Context, string, emitter.Record) error
}

var (
	_ acp.Agent       = (*agent)(nil)
	_ acp.AgentLoader = (*agent)(nil)
)

func (a *agent) Initialize(context.Context, acp.InitializeRequest) (acp.InitializeResponse, error) {
	return acp.InitializeResponse{ProtocolVersion: acp.ProtocolVersionNumber, AgentCapabilities: acp.AgentCapabilities{LoadSession: true}, AuthMethods: []acp.AuthMethod{}}, nil
}

func (a *agent) NewSession(context.Context, acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return acp.NewSessionResponse{SessionId: acp.SessionId("sess_" + hex.EncodeToString(b[:]))}, nil
}

func (a *agent) LoadSession(ctx context.Context, p acp.LoadSessionRequest) (acp.LoadSessionResponse, error) {
	if err := a.rt.Load(string(p.SessionId)); err != nil {
		return acp.LoadSessionResponse{}, err
	}
	if err := load(ctx, string(p.SessionId)); err != nil {
		return acp.LoadSessionResponse{}, acp.NewInternalError(map[string]any{"error": err.Error()})
	}
	return acp.LoadSessionResponse{}, nil
}

func (a *agent) Prompt(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	text := ""
	if len(p.Prompt) > 0 && p.Prompt[0].Text != nil {
		text = p.Prompt[0].Text.Text
	}
	report(ctx, a.record, string(p.SessionId), a.rt.RunStream(ctx, string(p.SessionId), text))
	if ctx.Err() != nil {
		return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
	}
	return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
}

func (a *agent) Cancel(context.Context, acp.CancelNotification) error { return nil }

func (a *agent) Authenticate(context.Context, acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	return acp.AuthenticateResponse{}, nil
}

func (a *agent) CloseSession(context.Context, acp.CloseSessionRequest) (acp.CloseSessionResponse, error) {
	return acp.CloseSessionResponse{}, nil
}

func (a *agent) ListSessions(context.Context, acp.ListSessionsRequest) (acp.ListSessionsResponse, error) {
	return acp.ListSessionsResponse{}, nil
}

func (a *agent) ResumeSession(context.Context, acp.ResumeSessionRequest) (acp.ResumeSessionResponse, error) {
	return acp.ResumeSessionResponse{}, nil
}

func (a *agent) SetSessionConfigOption(context.Context, acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	return acp.SetSessionConfigOptionResponse{}, nil
}

func (a *agent) SetSessionMode(context.Context, acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	return acp.SetSessionModeResponse{}, nil
}

// jsonrpc2 is the agent as a sourcegraph/jsonrpc2 handler: each method
// decodes its acp-go-sdk params and calls the agent's.
func (a *agent) jsonrpc2() jsonrpc2.Handler {
	return jsonrpc2.HandlerWithError(func(ctx context.Context, _ *jsonrpc2.Conn, req *jsonrpc2.Request) (any, error) {
		var params json.RawMessage
		if req.Params != nil {
			params = *req.Params
		}
		switch req.Method {
		case "initialize":
			return call(ctx, params, a.Initialize)
		case "session/new":
			return call(ctx, params, a.NewSession)
		case "session/load":
			return call(ctx, params, a.LoadSession)
		case "session/prompt":
			return call(ctx, params, a.Prompt)
		case "session/cancel":
			return nil, nil // the kit has cancelled the prompt's context
		}
		return nil, &jsonrpc2.Error{Code: jsonrpc2.CodeMethodNotFound, Message: req.Method}
	})
}

// call decodes params and calls f.
func call[P, R any](ctx context.Context, params json.RawMessage, f func(context.Context, P) (R, error)) (any, error) {
	var p P
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, &jsonrpc2.Error{Code: jsonrpc2.CodeInvalidParams, Message: err.Error()}
	}
	r, err := f(ctx, p)
	if err != nil {
		return nil, &jsonrpc2.Error{Code: jsonrpc2.CodeInternalError, Message: err.Error()}
	}
	return r, nil
}
