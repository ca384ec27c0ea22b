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
	returned := false
	defer c.settleOnPanic(&returned)
	err := f(c.bind(ctx), p)
	returned = true
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
	l, ok := a.inner.(acp.AgentLoader)
	if !ok {
		return acp.LoadSessionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionLoad)
	}
	return call(a.c, l.LoadSession, ctx, p)
}

func (a *kitAgent) HandleExtensionMethod(ctx context.Context, method string, params json.RawMessage) (any, error) {
	h, ok := a.inner.(acp.ExtensionMethodHandler)
	if !ok {
		return nil, acp.NewMethodNotFound(method)
	}
	returned := false
	defer a.c.settleOnPanic(&returned)
	res, err := h.HandleExtensionMethod(a.c.bind(ctx), method, params)
	returned = true
	return res, err
}

func (a *kitAgent) UnstableDidChangeDocument(ctx context.Context, p acp.UnstableDidChangeDocumentNotification) error {
	x, ok := a.inner.(interface {
		UnstableDidChangeDocument(context.Context, acp.UnstableDidChangeDocumentNotification) error
	})
	if !ok {
		return acp.NewMethodNotFound(acp.AgentMethodDocumentDidChange)
	}
	return notify(a.c, x.UnstableDidChangeDocument, ctx, p)
}

func (a *kitAgent) UnstableDidCloseDocument(ctx context.Context, p acp.UnstableDidCloseDocumentNotification) error {
	x, ok := a.inner.(interface {
		UnstableDidCloseDocument(context.Context, acp.UnstableDidCloseDocumentNotification) error
	})
	if !ok {
		return acp.NewMethodNotFound(acp.AgentMethodDocumentDidClose)
	}
	return notify(a.c, x.UnstableDidCloseDocument, ctx, p)
}

func (a *kitAgent) UnstableDidFocusDocument(ctx context.Context, p acp.UnstableDidFocusDocumentNotification) error {
	x, ok := a.inner.(interface {
		UnstableDidFocusDocument(context.Context, acp.UnstableDidFocusDocumentNotification) error
	})
	if !ok {
		return acp.NewMethodNotFound(acp.AgentMethodDocumentDidFocus)
	}
	return notify(a.c, x.UnstableDidFocusDocument, ctx, p)
}

func (a *kitAgent) UnstableDidOpenDocument(ctx context.Context, p acp.UnstableDidOpenDocumentNotification) error {
	x, ok := a.inner.(interface {
		UnstableDidOpenDocument(context.Context, acp.UnstableDidOpenDocumentNotification) error
	})
	if !ok {
		return acp.NewMethodNotFound(acp.AgentMethodDocumentDidOpen)
	}
	return notify(a.c, x.UnstableDidOpenDocument, ctx, p)
}

func (a *kitAgent) UnstableDidSaveDocument(ctx context.Context, p acp.UnstableDidSaveDocumentNotification) error {
	x, ok := a.inner.(interface {
		UnstableDidSaveDocument(context.Context, acp.UnstableDidSaveDocumentNotification) error
	})
	if !ok {
		return acp.NewMethodNotFound(acp.AgentMethodDocumentDidSave)
	}
	return notify(a.c, x.UnstableDidSaveDocument, ctx, p)
}

func (a *kitAgent) UnstableLogout(ctx context.Context, p acp.UnstableLogoutRequest) (acp.UnstableLogoutResponse, error) {
	x, ok := a.inner.(interface {
		UnstableLogout(context.Context, acp.UnstableLogoutRequest) (acp.UnstableLogoutResponse, error)
	})
	if !ok {
		return acp.UnstableLogoutResponse{}, acp.NewMethodNotFound(acp.AgentMethodLogout)
	}
	return call(a.c, x.UnstableLogout, ctx, p)
}

func (a *kitAgent) UnstableAcceptNes(ctx context.Context, p acp.UnstableAcceptNesNotification) error {
	x, ok := a.inner.(interface {
		UnstableAcceptNes(context.Context, acp.UnstableAcceptNesNotification) error
	})
	if !ok {
		return acp.NewMethodNotFound(acp.AgentMethodNesAccept)
	}
	return notify(a.c, x.UnstableAcceptNes, ctx, p)
}

func (a *kitAgent) UnstableCloseNes(ctx context.Context, p acp.UnstableCloseNesRequest) (acp.UnstableCloseNesResponse, error) {
	x, ok := a.inner.(interface {
		UnstableCloseNes(context.Context, acp.UnstableCloseNesRequest) (acp.UnstableCloseNesResponse, error)
	})
	if !ok {
		return acp.UnstableCloseNesResponse{}, acp.NewMethodNotFound(acp.AgentMethodNesClose)
	}
	return call(a.c, x.UnstableCloseNes, ctx, p)
}

func (a *kitAgent) UnstableRejectNes(ctx context.Context, p acp.UnstableRejectNesNotification) error {
	x, ok := a.inner.(interface {
		UnstableRejectNes(context.Context, acp.UnstableRejectNesNotification) error
	})
	if !ok {
		return acp.NewMethodNotFound(acp.AgentMethodNesReject)
	}
	return notify(a.c, x.UnstableRejectNes, ctx, p)
}

func (a *kitAgent) UnstableStartNes(ctx context.Context, p acp.UnstableStartNesRequest) (acp.UnstableStartNesResponse, error) {
	x, ok := a.inner.(interface {
		UnstableStartNes(context.Context, acp.UnstableStartNesRequest) (acp.UnstableStartNesResponse, error)
	})
	if !ok {
		return acp.UnstableStartNesResponse{}, acp.NewMethodNotFound(acp.AgentMethodNesStart)
	}
	return call(a.c, x.UnstableStartNes, ctx, p)
}

func (a *kitAgent) UnstableSuggestNes(ctx context.Context, p acp.UnstableSuggestNesRequest) (acp.UnstableSuggestNesResponse, error) {
	x, ok := a.inner.(interface {
		UnstableSuggestNes(context.Context, acp.UnstableSuggestNesRequest) (acp.UnstableSuggestNesResponse, error)
	})
	if !ok {
		return acp.UnstableSuggestNesResponse{}, acp.NewMethodNotFound(acp.AgentMethodNesSuggest)
	}
	return call(a.c, x.UnstableSuggestNes, ctx, p)
}

func (a *kitAgent) UnstableDisableProviders(ctx context.Context, p acp.UnstableDisableProvidersRequest) (acp.UnstableDisableProvidersResponse, error) {
	x, ok := a.inner.(interface {
		UnstableDisableProviders(context.Context, acp.UnstableDisableProvidersRequest) (acp.UnstableDisableProvidersResponse, error)
	})
	if !ok {
		return acp.UnstableDisableProvidersResponse{}, acp.NewMethodNotFound(acp.AgentMethodProvidersDisable)
	}
	return call(a.c, x.UnstableDisableProviders, ctx, p)
}

func (a *kitAgent) UnstableListProviders(ctx context.Context, p acp.UnstableListProvidersRequest) (acp.UnstableListProvidersResponse, error) {
	x, ok := a.inner.(interface {
		UnstableListProviders(context.Context, acp.UnstableListProvidersRequest) (acp.UnstableListProvidersResponse, error)
	})
	if !ok {
		return acp.UnstableListProvidersResponse{}, acp.NewMethodNotFound(acp.AgentMethodProvidersList)
	}
	return call(a.c, x.UnstableListProviders, ctx, p)
}

func (a *kitAgent) UnstableSetProviders(ctx context.Context, p acp.UnstableSetProvidersRequest) (acp.UnstableSetProvidersResponse, error) {
	x, ok := a.inner.(interface {
		UnstableSetProviders(context.Context, acp.UnstableSetProvidersRequest) (acp.UnstableSetProvidersResponse, error)
	})
	if !ok {
		return acp.UnstableSetProvidersResponse{}, acp.NewMethodNotFound(acp.AgentMethodProvidersSet)
	}
	return call(a.c, x.UnstableSetProviders, ctx, p)
}

func (a *kitAgent) UnstableForkSession(ctx context.Context, p acp.UnstableForkSessionRequest) (acp.UnstableForkSessionResponse, error) {
	x, ok := a.inner.(interface {
		UnstableForkSession(context.Context, acp.UnstableForkSessionRequest) (acp.UnstableForkSessionResponse, error)
	})
	if !ok {
		return acp.UnstableForkSessionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionFork)
	}
	return call(a.c, x.UnstableForkSession, ctx, p)
}

func (a *kitAgent) UnstableSetSessionModel(ctx context.Context, p acp.UnstableSetSessionModelRequest) (acp.UnstableSetSessionModelResponse, error) {
	x, ok := a.inner.(interface {
		UnstableSetSessionModel(context.Context, acp.UnstableSetSessionModelRequest) (acp.UnstableSetSessionModelResponse, error)
	})
	if !ok {
		return acp.UnstableSetSessionModelResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionSetModel)
	}
	return call(a.c, x.UnstableSetSessionModel, ctx, p)
}
