package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/eimhq/eim"
)

// codeRateLimited is this package's own code for 429; the inventory never
// returns it.
const codeRateLimited = "rate_limited"

// codeMediaType is this package's own code for 415: a body that is not
// JSON by its Content-Type.
const codeMediaType = "unsupported_media_type"

// wireCode is how an eim error code appears on the wire: the gRPC code name
// the original API put in "code", and the HTTP status.
type wireCode struct {
	name   string
	status int
}

// wireCodes maps every eim code to the wire. The original answered
// uniqueness violations with 400; we answer 409 (see docs/compatibility.md).
var wireCodes = map[string]wireCode{
	eim.EINVALID:       {"InvalidArgument", http.StatusBadRequest},
	eim.EPRECONDITION:  {"FailedPrecondition", http.StatusBadRequest},
	eim.ENOTFOUND:      {"NotFound", http.StatusNotFound},
	eim.ECONFLICT:      {"AlreadyExists", http.StatusConflict},
	eim.EUNAUTHORIZED:  {"Unauthenticated", http.StatusUnauthorized},
	eim.EFORBIDDEN:     {"PermissionDenied", http.StatusForbidden},
	eim.EUNAVAILABLE:   {"Unavailable", http.StatusServiceUnavailable},
	eim.ETOOLARGE:      {"ResourceExhausted", http.StatusRequestEntityTooLarge},
	eim.EINTERNAL:      {"Internal", http.StatusInternalServerError},
	eim.EUNIMPLEMENTED: {"Unimplemented", http.StatusNotImplemented},
	codeRateLimited:    {"ResourceExhausted", http.StatusTooManyRequests},
	codeMediaType:      {"InvalidArgument", http.StatusUnsupportedMediaType},
}

// errorBody is the wire shape of every error.
type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// writeError translates err to the wire, once. Internal errors are logged
// here (with the request ID) and never described to the client.
func (h *handler) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code := eim.ErrorCode(err)
	msg := eim.ErrorMessage(err)
	if ctxErr := r.Context().Err(); ctxErr != nil && code == eim.EINTERNAL {
		// The request ran out of time (or the client went away) and the
		// layer below reported it as an internal failure.
		code, msg = eim.EUNAVAILABLE, "request timed out"
		if errors.Is(ctxErr, context.Canceled) {
			msg = "request canceled"
		}
	}
	wc, ok := wireCodes[code]
	if !ok {
		wc, code = wireCodes[eim.EINTERNAL], eim.EINTERNAL
	}
	if code == eim.EINTERNAL {
		h.log.LogAttrs(r.Context(), slog.LevelError, "internal error",
			slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.String("request_id", ridFrom(r.Context())), slog.Any("err", err))
		msg = "internal error"
	}
	if code == eim.EUNAVAILABLE {
		// Retryable: the database is away, the request timed out, or a
		// write lost its races. Clients that honour Retry-After (the Go
		// client, the CLI) come back after it rather than at once.
		w.Header().Set("Retry-After", retryUnavailable)
	}
	h.writeJSON(w, wc.status, errorBody{Code: wc.name, Message: clipEchoes(msg)})
}

// retryUnavailable is the Retry-After of a 503, in seconds: a database
// restart or failover takes seconds, and a client retrying sooner only
// adds load to a server that is catching up.
const retryUnavailable = "2"

type ridKey struct{}

// requestID returns the caller's X-Request-Id when it is short and
// printable, else a fresh one.
func requestID(r *http.Request) string {
	if id := r.Header.Get("X-Request-Id"); id != "" && len(id) <= 64 && printable(id) {
		return id
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func ridFrom(ctx context.Context) string {
	s, _ := ctx.Value(ridKey{}).(string)
	return s
}

// Bounds of what an error message echoes of the request: each quoted value
// (the message quotes the client's values with %q), and the whole message.
const (
	maxEcho    = 64
	maxMessage = 1024
)

// truncate shortens s to at most n bytes, on a rune boundary, marking the
// cut with "…".
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// clipEchoes bounds msg: every double-quoted part longer than maxEcho is
// cut to its first maxEcho bytes, and the whole to maxMessage, so that an
// error never sends back more than a prefix of a large value (an ID of
// 60 KB in a path, a long name) whichever layer wrote the message.
func clipEchoes(msg string) string {
	if len(msg) <= maxEcho {
		return msg
	}
	var b strings.Builder
	for {
		i := strings.IndexByte(msg, '"')
		if i < 0 {
			b.WriteString(msg)
			break
		}
		b.WriteString(msg[:i+1])
		msg = msg[i+1:]
		// The end of the quoted part: the next quote not escaped.
		end := -1
		for j := 0; j < len(msg); j++ {
			if msg[j] == '\\' {
				j++
				continue
			}
			if msg[j] == '"' {
				end = j
				break
			}
		}
		if end < 0 { // unbalanced: the rest is cut as one value
			b.WriteString(truncate(msg, maxEcho))
			break
		}
		q := msg[:end]
		b.WriteString(truncate(q, maxEcho))
		b.WriteByte('"')
		msg = msg[end+1:]
	}
	return truncate(b.String(), maxMessage)
}
