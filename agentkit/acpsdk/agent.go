package acpsdk

import (
	"context"
	"encoding/json"

	acp "github.com/coder/acp-go-sdk"
)

// kitAgent is the acp.Agent the kit hands the SDK in place of the host's:
// Prompt runs with the kit's context (see Conn.promptContext), every
// method's context carries the connection (SessionFrom), and every method
// settles the connection's open compactions as failed when it
// panics (the panic goes on). Otherwise it forwards each call unchanged.
//
// The SDK finds an agent's optional methods (acp.AgentLoader,
// acp.AgentExperimental, acp.ExtensionMethodHandler) by type assertion, so
// kitAgent has them all: each forwards when the host's agent has it, and
// otherwise answers what the SDK answers for an agent without it,
// acp.NewMethodNotFound of the method, after the same decoding and
// validation of its params. TestKitAgentHasEveryOptionalMethodOfTheSDK
// checks the list against the SDK's source.
type kitAgent struct {
	inner acp.Agent
	c     *Conn
}

var (
	_ acp.Agent                  = (*kitAgent)(nil)
	_ acp.AgentLoader            = (*kitAgent)(nil)
	_ acp.AgentExperimental      = (*kitAgent)(nil)
	_ acp.ExtensionMethodHandler = (*kitAgent)(nil)
)

// The optional methods the SDK finds by type assertion to an anonymous
// interface, each such interface named after its method.
type (
	unstableDidChangeDocument interface {
		UnstableDidChangeDocument(context.Context, acp.UnstableDidChangeDocumentNotification) error
	}
	unstableDidCloseDocument interface {
		UnstableDidCloseDocument(context.Context, acp.UnstableDidCloseDocumentNotification) error
	}
	unstableDidFocusDocument interface {
		UnstableDidFocusDocument(context.Context, acp.UnstableDidFocusDocumentNotification) error
	}
	unstableDidOpenDocument interface {
		UnstableDidOpenDocument(context.Context, acp.UnstableDidOpenDocumentNotification) error
	}
	unstableDidSaveDocument interface {
		UnstableDidSaveDocument(context.Context, acp.UnstableDidSaveDocumentNotification) error
	}
	unstableLogout interface {
		UnstableLogout(context.Context, acp.UnstableLogoutRequest) (acp.UnstableLogoutResponse, error)
	}
	unstableAcceptNes interface {
		UnstableAcceptNes(context.Context, acp.UnstableAcceptNesNotification) error
	}
	unstableCloseNes interface {
		UnstableCloseNes(context.Context, acp.UnstableCloseNesRequest) (acp.UnstableCloseNesResponse, error)
	}
	unstableRejectNes interface {
		UnstableRejectNes(context.Context, acp.UnstableRejectNesNotification) error
	}
	unstableStartNes interface {
		UnstableStartNes(context.Context, acp.UnstableStartNesRequest) (acp.UnstableStartNesResponse, error)
	}
	unstableSuggestNes interface {
		UnstableSuggestNes(context.Context, acp.UnstableSuggestNesRequest) (acp.UnstableSuggestNesResponse, error)
	}
	unstableDisableProviders interface {
		UnstableDisableProviders(context.Context, acp.UnstableDisableProvidersRequest) (acp.UnstableDisableProvidersResponse, error)
	}
	unstableListProviders interface {
		UnstableListProviders(context.Context, acp.UnstableListProvidersRequest) (acp.UnstableListProvidersResponse, error)
	}
	unstableSetProviders interface {
		UnstableSetProviders(context.Context, acp.UnstableSetProvidersRequest) (acp.UnstableSetProvidersResponse, error)
	}
	unstableForkSession interface {
		UnstableForkSession(context.Context, acp.UnstableForkSessionRequest) (acp.UnstableForkSessionResponse, error)
	}
	unstableSetSessionModel interface {
		UnstableSetSessionModel(context.Context, acp.UnstableSetSessionModelRequest) (acp.UnstableSetSessionModelResponse, error)
	}
)

// call runs one method of the host's agent, settling on a panic.
func call[P, R any](c *Conn, f func(context.Context, P) (R, error), ctx context.Context, p P) (R, error) {
	returned := false
	defer c.settleOnPanic(&returned)
	r, err := f(c.bind(ctx), p)
	returned = true
	return r, err
}

// notify is call for a method without a result.
func notify[P any](c *Conn, f func(context.Context, P) error, ctx context.Context, p P) error {
	_, err := call(c, func(ctx context.Context, p P) (struct{}, error) { return struct{}{}, f(ctx, p) }, ctx, p)
	return err
}

// optional is call for a method the SDK finds on an agent by type
// assertion to I, f being the method expression of I: when the host's
// agent is no I, the answer is the SDK's for an agent without the method,
// acp.NewMethodNotFound of method.
func optional[I, P, R any](a *kitAgent, method string, f func(I, context.Context, P) (R, error), ctx context.Context, p P) (R, error) {
	x, ok := a.inner.(I)
	if !ok {
		var none R
		return none, acp.NewMethodNotFound(method)
	}
	return call(a.c, func(ctx context.Context, p P) (R, error) { return f(x, ctx, p) }, ctx, p)
}

// optionalNotify is optional for a method without a result.
func optionalNotify[I, P any](a *kitAgent, method string, f func(I, context.Context, P) error, ctx context.Context, p P) error {
	_, err := optional(a, method, func(x I, ctx context.Context, p P) (struct{}, error) { return struct{}{}, f(x, ctx, p) }, ctx, p)
	return err
}

// Prompt runs the host's Prompt with the kit's context for the prompt.
func (a *kitAgent) Prompt(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	return call(a.c, a.inner.Prompt, a.c.promptContext(ctx), p)
}

// Cancel forwards session/cancel: the SDK calls it on its notification
// goroutine, later than the kit has cancelled the prompt's context.
func (a *kitAgent) Cancel(ctx context.Context, p acp.CancelNotification) error {
	return notify(a.c, a.inner.Cancel, ctx, p)
}

func (a *kitAgent) Authenticate(ctx context.Context, p acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	return call(a.c, a.inner.Authenticate, ctx, p)
}

func (a *kitAgent) Initialize(ctx context.Context, p acp.InitializeRequest) (acp.InitializeResponse, error) {
	return call(a.c, a.inner.Initialize, ctx, p)
}

func (a *kitAgent) CloseSession(ctx context.Context, p acp.CloseSessionRequest) (acp.CloseSessionResponse, error) {
	return call(a.c, a.inner.CloseSession, ctx, p)
}

func (a *kitAgent) ListSessions(ctx context.Context, p acp.ListSessionsRequest) (acp.ListSessionsResponse, error) {
	return call(a.c, a.inner.ListSessions, ctx, p)
}

func (a *kitAgent) NewSession(ctx context.Context, p acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	return call(a.c, a.inner.NewSession, ctx, p)
}

func (a *kitAgent) ResumeSession(ctx context.Context, p acp.ResumeSessionRequest) (acp.ResumeSessionResponse, error) {
	return call(a.c, a.inner.ResumeSession, ctx, p)
}

func (a *kitAgent) SetSessionConfigOption(ctx context.Context, p acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	return call(a.c, a.inner.SetSessionConfigOption, ctx, p)
}

func (a *kitAgent) SetSessionMode(ctx context.Context, p acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	return call(a.c, a.inner.SetSessionMode, ctx, p)
}

func (a *kitAgent) LoadSession(ctx context.Context, p acp.LoadSessionRequest) (acp.LoadSessionResponse, error) {
	return optional(a, acp.AgentMethodSessionLoad, acp.AgentLoader.LoadSession, ctx, p)
}

func (a *kitAgent) HandleExtensionMethod(ctx context.Context, method string, params json.RawMessage) (any, error) {
	return optional(a, method, func(h acp.ExtensionMethodHandler, ctx context.Context, params json.RawMessage) (any, error) {
		return h.HandleExtensionMethod(ctx, method, params)
	}, ctx, params)
}

func (a *kitAgent) UnstableDidChangeDocument(ctx context.Context, p acp.UnstableDidChangeDocumentNotification) error {
	return optionalNotify(a, acp.AgentMethodDocumentDidChange, unstableDidChangeDocument.UnstableDidChangeDocument, ctx, p)
}

func (a *kitAgent) UnstableDidCloseDocument(ctx context.Context, p acp.UnstableDidCloseDocumentNotification) error {
	return optionalNotify(a, acp.AgentMethodDocumentDidClose, unstableDidCloseDocument.UnstableDidCloseDocument, ctx, p)
}

func (a *kitAgent) UnstableDidFocusDocument(ctx context.Context, p acp.UnstableDidFocusDocumentNotification) error {
	return optionalNotify(a, acp.AgentMethodDocumentDidFocus, unstableDidFocusDocument.UnstableDidFocusDocument, ctx, p)
}

func (a *kitAgent) UnstableDidOpenDocument(ctx context.Context, p acp.UnstableDidOpenDocumentNotification) error {
	return optionalNotify(a, acp.AgentMethodDocumentDidOpen, unstableDidOpenDocument.UnstableDidOpenDocument, ctx, p)
}

func (a *kitAgent) UnstableDidSaveDocument(ctx context.Context, p acp.UnstableDidSaveDocumentNotification) error {
	return optionalNotify(a, acp.AgentMethodDocumentDidSave, unstableDidSaveDocument.UnstableDidSaveDocument, ctx, p)
}

func (a *kitAgent) UnstableLogout(ctx context.Context, p acp.UnstableLogoutRequest) (acp.UnstableLogoutResponse, error) {
	return optional(a, acp.AgentMethodLogout, unstableLogout.UnstableLogout, ctx, p)
}

func (a *kitAgent) UnstableAcceptNes(ctx context.Context, p acp.UnstableAcceptNesNotification) error {
	return optionalNotify(a, acp.AgentMethodNesAccept, unstableAcceptNes.UnstableAcceptNes, ctx, p)
}

func (a *kitAgent) UnstableCloseNes(ctx context.Context, p acp.UnstableCloseNesRequest) (acp.UnstableCloseNesResponse, error) {
	return optional(a, acp.AgentMethodNesClose, unstableCloseNes.UnstableCloseNes, ctx, p)
}

func (a *kitAgent) UnstableRejectNes(ctx context.Context, p acp.UnstableRejectNesNotification) error {
	return optionalNotify(a, acp.AgentMethodNesReject, unstableRejectNes.UnstableRejectNes, ctx, p)
}

func (a *kitAgent) UnstableStartNes(ctx context.Context, p acp.UnstableStartNesRequest) (acp.UnstableStartNesResponse, error) {
	return optional(a, acp.AgentMethodNesStart, unstableStartNes.UnstableStartNes, ctx, p)
}

func (a *kitAgent) UnstableSuggestNes(ctx context.Context, p acp.UnstableSuggestNesRequest) (acp.UnstableSuggestNesResponse, error) {
	return optional(a, acp.AgentMethodNesSuggest, unstableSuggestNes.UnstableSuggestNes, ctx, p)
}

func (a *kitAgent) UnstableDisableProviders(ctx context.Context, p acp.UnstableDisableProvidersRequest) (acp.UnstableDisableProvidersResponse, error) {
	return optional(a, acp.AgentMethodProvidersDisable, unstableDisableProviders.UnstableDisableProviders, ctx, p)
}

func (a *kitAgent) UnstableListProviders(ctx context.Context, p acp.UnstableListProvidersRequest) (acp.UnstableListProvidersResponse, error) {
	return optional(a, acp.AgentMethodProvidersList, unstableListProviders.UnstableListProviders, ctx, p)
}

func (a *kitAgent) UnstableSetProviders(ctx context.Context, p acp.UnstableSetProvidersRequest) (acp.UnstableSetProvidersResponse, error) {
	return optional(a, acp.AgentMethodProvidersSet, unstableSetProviders.UnstableSetProviders, ctx, p)
}

func (a *kitAgent) UnstableForkSession(ctx context.Context, p acp.UnstableForkSessionRequest) (acp.UnstableForkSessionResponse, error) {
	return optional(a, acp.AgentMethodSessionFork, unstableForkSession.UnstableForkSession, ctx, p)
}

func (a *kitAgent) UnstableSetSessionModel(ctx context.Context, p acp.UnstableSetSessionModelRequest) (acp.UnstableSetSessionModelResponse, error) {
	return optional(a, acp.AgentMethodSessionSetModel, unstableSetSessionModel.UnstableSetSessionModel, ctx, p)
}
