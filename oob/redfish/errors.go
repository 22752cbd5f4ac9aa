package redfish

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/eimhq/eim/oob/bmchttp"
	"github.com/stmcginnis/gofish/schemas"
)

// Kind classifies a failure, for a caller to branch on with errors.Is.
type Kind int

const (
	// Failed: any other failure (the service answered with an error).
	Failed Kind = iota
	// Unreachable: no answer from the service within the time allowed.
	Unreachable
	// BadCredentials: the service refused the user name or password (401),
	// or the account may not do this (403).
	BadCredentials
	// BadCertificate: the service's TLS certificate is not trusted.
	BadCertificate
	// Unsupported: the system does not allow this reset type, boot target
	// or action.
	Unsupported
	// AlreadyInState: a reset refused with 409 Conflict because the system
	// already is where it would take it (Dell's iDRAC).
	AlreadyInState
	// Busy: the service has no session to give (its limit) or answered 503.
	Busy
	// Ambiguous: the service has several systems and none was chosen, or
	// the one chosen does not exist.
	Ambiguous
)

func (k Kind) String() string {
	switch k {
	case Unreachable:
		return "unreachable"
	case BadCredentials:
		return "bad credentials"
	case BadCertificate:
		return "untrusted certificate"
	case Unsupported:
		return "unsupported"
	case AlreadyInState:
		return "already in that state"
	case Busy:
		return "busy"
	case Ambiguous:
		return "ambiguous system"
	}
	return "failed"
}

// Sentinels for errors.Is: errors.Is(err, redfish.ErrBusy).
var (
	ErrUnreachable    = &Error{Kind: Unreachable}
	ErrBadCredentials = &Error{Kind: BadCredentials}
	ErrBadCertificate = &Error{Kind: BadCertificate}
	ErrUnsupported    = &Error{Kind: Unsupported}
	ErrAlreadyInState = &Error{Kind: AlreadyInState}
	ErrBusy           = &Error{Kind: Busy}
	ErrAmbiguous      = &Error{Kind: Ambiguous}
)

// Error is a failed Redfish operation. Its message is safe to show a user:
// it names the operation and the service, and quotes the service's own
// error message, never the password or a session token.
type Error struct {
	Kind   Kind
	Op     string // e.g. "reset On", "read system"
	URL    string // the service's root URL
	Status int    // the HTTP status, when the service answered
	Detail string

	cause error
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("redfish %s at %s: %s", e.Op, e.URL, e.Kind)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// Unwrap returns the cause: the context's error when the caller gave up,
// the TLS or network error.
func (e *Error) Unwrap() error { return e.cause }

// Is matches the sentinels by kind.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Op == "" && t.URL == "" && t.Detail == "" && t.Kind == e.Kind
}

// classify turns what gofish or net/http returned into an *Error.
func (c *Client) classify(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	fail := func(k Kind, status int, detail string) error {
		return &Error{Kind: k, Op: op, URL: c.root, Status: status, Detail: c.redact(detail), cause: err}
	}
	if ctx.Err() != nil {
		// The caller gave up or its deadline passed: nothing is known of
		// the service.
		return fail(Failed, 0, "cancelled: "+ctx.Err().Error())
	}
	var rf *schemas.Error
	if errors.As(err, &rf) {
		k, detail := classifyAnswer(rf.HTTPReturnedStatusCode, rf.Code, rf.Message, extendedIDs(rf), extendedMessages(rf))
		return fail(k, rf.HTTPReturnedStatusCode, detail)
	}
	switch f, detail := bmchttp.Classify(err); f {
	case bmchttp.BadCertificate:
		return fail(BadCertificate, 0, detail+" (give the BMC's CA bundle, or choose insecure)")
	case bmchttp.NoAnswer:
		return fail(Unreachable, 0, fmt.Sprintf("no answer within %s", c.cfg.Timeout))
	case bmchttp.Refused:
		return fail(Unreachable, 0, detail)
	}
	return fail(Failed, 0, err.Error())
}

func extendedIDs(e *schemas.Error) []string {
	ids := make([]string, 0, len(e.ExtendedInfos))
	for _, m := range e.ExtendedInfos {
		ids = append(ids, m.MessageID)
	}
	return ids
}

func extendedMessages(e *schemas.Error) []string {
	msgs := make([]string, 0, len(e.ExtendedInfos))
	for _, m := range e.ExtendedInfos {
		if m.Message != "" {
			msgs = append(msgs, m.Message)
		}
	}
	return msgs
}

// classifyAnswer classifies an error answer of the service by its status
// and the message IDs of its body (Base registry keys, possibly prefixed by
// the registry's name and version).
func classifyAnswer(status int, code, message string, ids, msgs []string) (Kind, string) {
	has := func(key string) bool {
		if strings.HasSuffix(code, "."+key) || code == key {
			return true
		}
		for _, id := range ids {
			if strings.HasSuffix(id, "."+key) || id == key {
				return true
			}
		}
		return false
	}
	detail := fmt.Sprintf("HTTP %d", status)
	text := message
	if len(msgs) > 0 && (text == "" || strings.HasPrefix(code, "Base.") && strings.HasSuffix(code, ".GeneralError")) {
		text = strings.Join(msgs, "; ")
	}
	if text != "" {
		detail += ": " + text
	}
	const maxDetail = 300
	if len(detail) > maxDetail {
		detail = detail[:maxDetail] + "…"
	}
	switch {
	case has("SessionLimitExceeded"):
		return Busy, detail
	case status == http.StatusUnauthorized:
		return BadCredentials, detail
	case status == http.StatusForbidden:
		return BadCredentials, detail + " (the account lacks the privilege)"
	case status == http.StatusServiceUnavailable, status == http.StatusTooManyRequests:
		return Busy, detail
	case has("ActionNotSupported"), has("ActionParameterValueNotInList"), has("PropertyValueNotInList"), has("PropertyUnknown"):
		return Unsupported, detail
	}
	return Failed, detail
}

// redact removes the password from text the service produced, should one
// ever echo it.
func (c *Client) redact(s string) string {
	if c.cfg.Password == "" {
		return s
	}
	return strings.ReplaceAll(s, c.cfg.Password, "********")
}
