package southbound

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"connectrpc.com/connect"

	"github.com/eimhq/eim"
)

// Node is the authenticated caller of a southbound call.
type Node struct {
	HostID  string
	Project string // the host's project (name)
	// Gen is the host's credential generation the token was issued at.
	Gen int64
}

type nodeKey struct{}

// WithNode returns ctx carrying n, as the Interceptor does (for handler
// tests that call a service directly).
func WithNode(ctx context.Context, n Node) context.Context {
	// What the call writes, the node did (the audit log's principal).
	ctx = eim.WithActor(ctx, eim.NodeActor(n.HostID))
	return context.WithValue(ctx, nodeKey{}, n)
}

// NodeFrom returns the node that made the call, set by the Interceptor.
func NodeFrom(ctx context.Context) (Node, bool) {
	n, ok := ctx.Value(nodeKey{}).(Node)
	return n, ok
}

// Interceptor returns the Connect interceptor that authenticates nodes: a
// valid node token, then a host that still exists, is not UNTRUSTED or
// DELETED, and whose credential generation is the token's. Anything else is
// CodeUnauthenticated (the agent fetches a new token, and re-discovers when
// that fails). Handlers find the caller with NodeFrom.
func (s *Server) Interceptor() connect.Interceptor { return nodeAuth{s} }

type nodeAuth struct{ s *Server }

func (a nodeAuth) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			return next(ctx, req)
		}
		n, err := a.s.authenticate(ctx, req.Header())
		if err != nil {
			return nil, err
		}
		return next(WithNode(ctx, n), req)
	}
}

func (a nodeAuth) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (a nodeAuth) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		n, err := a.s.authenticate(ctx, conn.RequestHeader())
		if err != nil {
			return err
		}
		return next(WithNode(ctx, n), conn)
	}
}

// NodeHTTP authenticates the node calling a plain HTTP handler (a file
// download) as Interceptor does a Connect call: the handler finds the
// caller with NodeFrom. A refusal is 401, a store away 503.
func (s *Server) NodeHTTP(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := s.authenticate(r.Context(), r.Header)
		if err != nil {
			status := http.StatusUnauthorized
			if connect.CodeOf(err) == connect.CodeUnavailable {
				w.Header().Set("Retry-After", "2")
				status = http.StatusServiceUnavailable
			}
			http.Error(w, err.Error(), status)
			return
		}
		h.ServeHTTP(w, r.WithContext(WithNode(r.Context(), n)))
	})
}

// errRevoked is what a node with a good token but revoked credentials hears.
var errRevoked = errors.New("credentials revoked")

func (s *Server) authenticate(ctx context.Context, h http.Header) (Node, error) {
	scheme, tok, ok := strings.Cut(h.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return Node{}, connect.NewError(connect.CodeUnauthenticated, errors.New("missing bearer token"))
	}
	c, err := s.verifier.Verify(strings.TrimSpace(tok))
	if err != nil {
		var e *eim.Error
		msg := "invalid token"
		if errors.As(err, &e) {
			msg = e.Message
		}
		return Node{}, connect.NewError(connect.CodeUnauthenticated, errors.New(msg))
	}
	if c.Subject != ClientID(c.HostID) {
		return Node{}, connect.NewError(connect.CodeUnauthenticated, errors.New("not a node token"))
	}
	cred, err := s.nodeCredentials(ctx, c.Project, c.HostID)
	switch {
	case eim.ErrorCode(err) == eim.ENOTFOUND:
		return Node{}, connect.NewError(connect.CodeUnauthenticated, errRevoked)
	case err != nil:
		if ctx.Err() != nil {
			return Node{}, connect.NewError(connect.CodeCanceled, ctx.Err())
		}
		s.storeWarn("node auth: read host", c.HostID, err)
		return Node{}, connect.NewError(connect.CodeUnavailable, errors.New("try again later"))
	}
	if cred.Revoked() || cred.Gen != c.Gen {
		return Node{}, connect.NewError(connect.CodeUnauthenticated, errRevoked)
	}
	return Node{HostID: c.HostID, Project: c.Project, Gen: c.Gen}, nil
}
