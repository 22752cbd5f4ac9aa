package ipmi

import "fmt"

// Kind classifies a failure, for a caller to branch on with errors.Is.
type Kind int

const (
	// Failed: any other failure (the BMC answered with an error).
	Failed Kind = iota
	// Unreachable: no answer from the BMC within the time allowed.
	Unreachable
	// BadCredentials: the BMC refused the user name or password.
	BadCredentials
	// Unsupported: the BMC does not implement the command or its data.
	Unsupported
)

func (k Kind) String() string {
	switch k {
	case Unreachable:
		return "unreachable"
	case BadCredentials:
		return "bad credentials"
	case Unsupported:
		return "unsupported"
	}
	return "failed"
}

// Sentinels for errors.Is: errors.Is(err, ipmi.ErrUnreachable).
var (
	ErrUnreachable    = &Error{Kind: Unreachable}
	ErrBadCredentials = &Error{Kind: BadCredentials}
	ErrUnsupported    = &Error{Kind: Unsupported}
)

// Error is a failed IPMI operation. Its message is safe to show a user: it
// names the operation and the BMC's address and quotes at most ipmitool's
// own error line, never the password.
type Error struct {
	Kind Kind
	Op   string // e.g. "power on", "power status"
	Addr string // host:port
	// Detail is ipmitool's error line, or what went wrong running it.
	Detail string

	cause error // the context's error, for errors.Is(err, context.Canceled)
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("ipmi %s at %s: %s", e.Op, e.Addr, e.Kind)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// Unwrap returns the context's error when the command was cut short.
func (e *Error) Unwrap() error { return e.cause }

// Is matches the sentinels by kind.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Op == "" && t.Addr == "" && t.Kind == e.Kind
}
