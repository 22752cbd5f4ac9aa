package southbound

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"connectrpc.com/connect"

	"github.com/eimhq/eim"
)

// Caller returns the node of a call (set by the Interceptor), or an
// Unauthenticated error when there is none.
func Caller(ctx context.Context) (Node, error) {
	n, ok := NodeFrom(ctx)
	if !ok || n.HostID == "" || n.Project == "" {
		return Node{}, connect.NewError(connect.CodeUnauthenticated, errNoNode)
	}
	return n, nil
}

var errNoNode = errors.New("no node credentials")

// Error translates an error of a module or the store into a Connect error,
// once, at the edge: the code from the error's eim code, the message safe
// to show. Internal errors are logged (as op) and not detailed to the node.
// A Connect error passes through.
func Error(ctx context.Context, log *slog.Logger, op string, err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	if ctx.Err() != nil {
		return connect.NewError(connect.CodeCanceled, ctx.Err())
	}
	code := connect.CodeInternal
	switch eim.ErrorCode(err) {
	case eim.ENOTFOUND:
		code = connect.CodeNotFound
	case eim.EINVALID, eim.ETOOLARGE:
		code = connect.CodeInvalidArgument
	case eim.EPRECONDITION:
		code = connect.CodeFailedPrecondition
	case eim.ECONFLICT:
		code = connect.CodeAborted
	case eim.EUNAUTHORIZED:
		code = connect.CodeUnauthenticated
	case eim.EFORBIDDEN:
		code = connect.CodePermissionDenied
	case eim.EUNAVAILABLE:
		code = connect.CodeUnavailable
	}
	if code == connect.CodeInternal {
		log.Error(op, "err", err)
	}
	return connect.NewError(code, errors.New(eim.ErrorMessage(err)))
}

// storeWarn logs a node call that could not read the store. While the
// database is away every node's call fails so: one line per storeWarnEvery
// says so, with how many calls failed since the last line, rather than a
// line per call of a whole fleet.
func (s *Server) storeWarn(msg, hostID string, err error) {
	n := s.storeFails.Add(1)
	now := s.now().UnixNano()
	last := s.storeWarned.Load()
	if now-last < int64(storeWarnEvery) || !s.storeWarned.CompareAndSwap(last, now) {
		return
	}
	s.storeFails.Add(-n)
	s.log.Warn(msg, "host", hostID, "error", err, "failed_calls", n)
}

// storeWarnEvery spaces the log lines of storeWarn.
const storeWarnEvery = 5 * time.Second
