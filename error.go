package eim

import (
	"errors"
	"fmt"
)

// Error codes. Every error that crosses a package edge carries one of them, so
// each edge (SQL, HTTP, RPC) translates codes once instead of parsing strings.
const (
	ECONFLICT     = "conflict"     // uniqueness violation or concurrent change
	EINTERNAL     = "internal"     // a bug or an unexpected failure
	EINVALID      = "invalid"      // bad input; the message names what is wrong
	ENOTFOUND     = "not_found"    // no such resource (or not visible to the caller)
	EPRECONDITION = "precondition" // valid input, but the resource's state forbids it
	EUNAUTHORIZED = "unauthorized" // no or bad credentials
	EFORBIDDEN    = "forbidden"    // credentials lack the role
	EUNAVAILABLE  = "unavailable"  // try again later
	ETOOLARGE     = "too_large"    // request body over the limit
	// EUNIMPLEMENTED: the operation belongs to a module that runs nowhere
	// in the deployment (the message names it).
	EUNIMPLEMENTED = "unimplemented"
)

// Error is the application error: a code for programs and a message that is
// safe to show to a user.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("eim: %s: %s", e.Code, e.Message) }

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first *Error in err's chain, EINTERNAL for
// any other non-nil error and "" for nil.
func ErrorCode(err error) string {
	if err == nil {
		return "" // before e, which escapes: no allocation on the hot paths
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessage returns the user-safe message of err. Internal errors are not
// described to users.
func ErrorMessage(err error) string {
	var e *Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &e):
		return e.Message
	default:
		return "internal error"
	}
}
