// Package client is a small Go client of EIM's northbound REST API, used by
// the eim CLI and by end-to-end tests.
//
// Errors come back as *eim.Error with the code the server's error body names
// (NotFound → eim.ENOTFOUND, PermissionDenied → eim.EFORBIDDEN …), so callers
// branch with eim.ErrorCode as they would in the server.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/eimhq/eim"
)

// maxResponseBytes bounds what is read from the server (a page of 100
// expanded hosts is well below it).
const maxResponseBytes = 64 << 20

// Client talks to one EIM server with one bearer token. It is safe for
// concurrent use.
type Client struct {
	base  string
	token string
	hc    *http.Client
}

// New returns a client of the server at baseURL (e.g.
// "http://127.0.0.1:8080"). An empty token sends no Authorization header; a
// nil httpClient means http.DefaultClient.
func New(baseURL, token string, httpClient *http.Client) *Client {
	if httpClient == nil {
		httpClient = http.DefaultClient
	}
	return &Client{base: strings.TrimRight(baseURL, "/"), token: token, hc: httpClient}
}

// Do sends one request to path (below the base URL, with its query string)
// and decodes the answer into out.
//
// in is the request body: nil for none, a json.RawMessage or []byte sent as
// is, or any other value encoded as JSON. out is nil to discard the body, a
// *json.RawMessage to keep it raw, or a value to decode JSON into. A non-2xx
// answer is an *eim.Error decoded from the error body.
//
// A request the server's rate limit refused (429) was not run, so Do sends
// it again after the server's Retry-After (at most maxRateWait each time),
// up to maxRateRetries times, as long as ctx lasts.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	var body []byte
	switch v := in.(type) {
	case nil:
	case json.RawMessage:
		body = v
	case []byte:
		body = v
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return eim.Errorf(eim.EINVALID, "encode request body: %v", err)
		}
		body = b
	}
	for try := 0; ; try++ {
		wait, err := c.do(ctx, method, path, in != nil, body, out)
		if wait == 0 || try == maxRateRetries {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// maxRateRetries and maxRateWait bound how long Do waits out a server's
// rate limit.
const (
	maxRateRetries = 10
	maxRateWait    = 10 * time.Second
)

// do sends the request once. wait is non-zero when the server's rate
// limit refused it: how long to wait before sending it again.
func (c *Client) do(ctx context.Context, method, path string, hasBody bool, body []byte, out any) (wait time.Duration, err error) {
	var rd io.Reader
	if hasBody {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, eim.Errorf(eim.EINVALID, "bad request URL %q: %v", c.base+path, err)
	}
	if hasBody {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return 0, eim.Errorf(eim.EUNAVAILABLE, "cannot reach %s: %v", c.base, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return 0, eim.Errorf(eim.EUNAVAILABLE, "%s %s: reading the answer: %v", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		if resp.StatusCode == http.StatusTooManyRequests {
			wait = retryAfter(resp.Header.Get("Retry-After"))
		}
		return wait, decodeError(resp.StatusCode, data)
	}
	switch v := out.(type) {
	case nil:
		return 0, nil
	case *json.RawMessage:
		*v = append((*v)[:0], data...)
		return 0, nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return 0, eim.Errorf(eim.EINTERNAL, "%s %s: decoding the answer: %v", method, path, err)
	}
	return 0, nil
}

// retryAfter reads a Retry-After in seconds (the HTTP-date form is not
// used by EIM), 1 s when absent or unreadable, at most maxRateWait; a
// random tenth is added so that clients refused together do not return
// together.
func retryAfter(h string) time.Duration {
	d := time.Second
	if n, err := strconv.Atoi(strings.TrimSpace(h)); err == nil && n >= 0 {
		d = time.Duration(n) * time.Second
	}
	d = min(max(d, 100*time.Millisecond), maxRateWait)
	return d + rand.N(d/10+1)
}

// codes maps the wire code names back to eim codes.
var codes = map[string]string{
	"InvalidArgument":    eim.EINVALID,
	"FailedPrecondition": eim.EPRECONDITION,
	"NotFound":           eim.ENOTFOUND,
	"AlreadyExists":      eim.ECONFLICT,
	"Unauthenticated":    eim.EUNAUTHORIZED,
	"PermissionDenied":   eim.EFORBIDDEN,
	"Unavailable":        eim.EUNAVAILABLE,
	"Internal":           eim.EINTERNAL,
}

// statusCodes maps HTTP statuses to eim codes when the body names none.
var statusCodes = map[int]string{
	http.StatusBadRequest:            eim.EINVALID,
	http.StatusUnauthorized:          eim.EUNAUTHORIZED,
	http.StatusForbidden:             eim.EFORBIDDEN,
	http.StatusNotFound:              eim.ENOTFOUND,
	http.StatusConflict:              eim.ECONFLICT,
	http.StatusRequestEntityTooLarge: eim.ETOOLARGE,
	http.StatusTooManyRequests:       eim.EUNAVAILABLE,
	http.StatusServiceUnavailable:    eim.EUNAVAILABLE,
	http.StatusGatewayTimeout:        eim.EUNAVAILABLE,
	http.StatusBadGateway:            eim.EUNAVAILABLE,
}

// decodeError turns an error answer into an *eim.Error.
func decodeError(status int, data []byte) error {
	var body struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	_ = json.Unmarshal(data, &body) // a proxy's HTML error page is not JSON
	code, ok := codes[body.Code]
	if !ok || body.Code == "ResourceExhausted" {
		code, ok = statusCodes[status]
		if !ok {
			code = eim.EINTERNAL
		}
	}
	msg := body.Message
	if msg == "" {
		msg = fmt.Sprintf("server answered %d %s", status, http.StatusText(status))
	}
	if status == http.StatusTooManyRequests && body.Message == "" {
		msg = "rate limited by the server; try again later"
	}
	return &eim.Error{Code: code, Message: msg}
}
