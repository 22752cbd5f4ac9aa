package amt

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/eimhq/eim/oob/bmchttp"
)

// Kind classifies a failure, for a caller to branch on with errors.Is.
type Kind int

const (
	// Failed: any other failure (the MPS or AMT answered with an error).
	Failed Kind = iota
	// Unreachable: no answer from the MPS in time, or the device has no
	// CIRA connection to it (the MPS's 404).
	Unreachable
	// BadCredentials: the MPS refused the user name or password.
	BadCredentials
	// BadCertificate: the MPS's TLS certificate is not trusted.
	BadCertificate
	// Busy: the MPS answered 503 or 429.
	Busy
)

func (k Kind) String() string {
	switch k {
	case Unreachable:
		return "unreachable"
	case BadCredentials:
		return "bad credentials"
	case BadCertificate:
		return "untrusted certificate"
	case Busy:
		return "busy"
	}
	return "failed"
}

// Sentinels for errors.Is.
var (
	ErrUnreachable    = &Error{Kind: Unreachable}
	ErrBadCredentials = &Error{Kind: BadCredentials}
	ErrBadCertificate = &Error{Kind: BadCertificate}
	ErrBusy           = &Error{Kind: Busy}
)

// Error is a failed operation. Its message names the operation and the
// MPS, and quotes the MPS's error text; never the password or the token.
type Error struct {
	Kind   Kind
	Op     string
	URL    string // the MPS's scheme://host[:port]
	Status int    // the HTTP status, when the MPS answered
	Detail string

	cause error
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("amt %s via MPS %s: %s", e.Op, e.URL, e.Kind)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// Unwrap returns the cause (the context's error, a TLS or network error).
func (e *Error) Unwrap() error { return e.cause }

// Is matches the sentinels by kind.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Op == "" && t.URL == "" && t.Detail == "" && t.Kind == e.Kind
}

func (c *Client) redact(s string) string {
	for _, secret := range []string{c.cfg.Password, c.token} {
		if secret != "" {
			s = strings.ReplaceAll(s, secret, "********")
		}
	}
	return s
}

// answerError classifies an error answer of the MPS.
func (c *Client) answerError(op string, status int, data []byte) error {
	detail := fmt.Sprintf("HTTP %d", status)
	if msg := parseError(data); msg != "" {
		detail += ": " + msg
	}
	k := Failed
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden:
		k = BadCredentials
	case http.StatusNotFound:
		k = Unreachable // the device is not connected (CIRA), or unknown
	case http.StatusServiceUnavailable, http.StatusTooManyRequests, http.StatusBadGateway, http.StatusGatewayTimeout:
		k = Busy
	}
	return &Error{Kind: k, Op: op, URL: c.root, Status: status, Detail: c.redact(detail)}
}

// classify turns a transport error into an *Error.
func (c *Client) classify(ctx context.Context, op string, err error) error {
	fail := func(k Kind, detail string) error {
		return &Error{Kind: k, Op: op, URL: c.root, Detail: c.redact(detail), cause: err}
	}
	if ctx.Err() != nil {
		return fail(Failed, "cancelled: "+ctx.Err().Error())
	}
	switch f, detail := bmchttp.Classify(err); f {
	case bmchttp.BadCertificate:
		return fail(BadCertificate, detail+" (give the MPS's CA bundle, or choose insecure)")
	case bmchttp.NoAnswer:
		return fail(Unreachable, fmt.Sprintf("no answer within %s", c.cfg.Timeout))
	case bmchttp.Refused:
		return fail(Unreachable, detail)
	}
	return fail(Failed, err.Error())
}
