// Package redfish drives a BMC through its DMTF Redfish service, with
// gofish (github.com/stmcginnis/gofish) as the HTTP and schema client: the
// power state and the ComputerSystem.Reset action (checked against the
// system's ResetType@Redfish.AllowableValues), the boot source override
// (read back), and the manager's virtual CD. It speaks Redfish's own
// vocabulary; oob's adapter (oob/redfishdriver.go) maps it to the
// protocol-neutral oob.Conn.
//
// A Client holds one session (created by Dial, deleted by Close) or sends
// Basic authentication; TLS is checked against a CA bundle unless the
// caller chose insecure. Actions a service runs asynchronously (202 and a
// task monitor) are followed to completion within a deadline. Failures are
// *Error values of a Kind (unreachable, bad credentials, untrusted
// certificate, unsupported, already in state, busy, ambiguous) whose
// messages never include the password or the session token.
package redfish

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/eimhq/eim/oob/bmchttp"
	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/schemas"
)

// Defaults of Config's durations.
const (
	DefaultTimeout     = 30 * time.Second
	DefaultTaskTimeout = 10 * time.Minute
	DefaultTaskPoll    = 2 * time.Second
)

// Config addresses one system of a Redfish service.
type Config struct {
	// URL is the service's scheme, host and port (https://10.0.0.5 or
	// https://bmc:8443); a bare host[:port] means https.
	URL string
	// SystemID is the ComputerSystem's Id; empty: the service's only one.
	SystemID           string
	Username, Password string
	// CABundle (PEM) is what the service's certificate must chain to
	// (empty: the system's roots); Insecure skips the check.
	CABundle []byte
	Insecure bool
	// BasicAuth sends the credentials with every request instead of
	// opening a session.
	BasicAuth bool
	// Timeout bounds each request (0: DefaultTimeout); a service that has
	// not answered by then is Unreachable.
	Timeout time.Duration
	// TaskTimeout bounds the wait for an asynchronous action's task (0:
	// DefaultTaskTimeout); TaskPoll is the interval between reads of its
	// monitor when the service gives no Retry-After (0: DefaultTaskPoll).
	TaskTimeout time.Duration
	TaskPoll    time.Duration
}

// Client is a connection to one system of a Redfish service. A Client is
// used by one goroutine at a time.
type Client struct {
	cfg     Config
	root    string // scheme://host[:port], for messages
	api     *gofish.APIClient
	session bool

	systemURI string
	systemID  string
	systems   []string // all the service's system IDs
}

// Dial connects to the service, opens a session (unless cfg.BasicAuth) and
// finds the system: cfg.SystemID, or the only one. Several systems and no
// SystemID is ErrAmbiguous naming them; so is a SystemID the service does
// not have.
func Dial(ctx context.Context, cfg Config) (*Client, error) {
	root, err := normalise(cfg.URL)
	if err != nil {
		return nil, err
	}
	if cfg.Username == "" {
		return nil, errors.New("redfish: username is empty")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.TaskTimeout <= 0 {
		cfg.TaskTimeout = DefaultTaskTimeout
	}
	if cfg.TaskPoll <= 0 {
		cfg.TaskPoll = DefaultTaskPoll
	}
	c := &Client{cfg: cfg, root: root}
	hc, err := httpClient(cfg)
	if err != nil {
		return nil, err
	}
	// Basic credentials first (reading the service root needs none), then
	// a session when the service has a SessionService (some older BMCs
	// have none: they keep Basic).
	api, err := gofish.ConnectContext(ctx, gofish.ClientConfig{
		Endpoint: root, Username: cfg.Username, Password: cfg.Password,
		HTTPClient: hc, NoModifyTransport: true, BasicAuth: true,
		ReuseConnections: true,
	})
	if err != nil {
		hc.CloseIdleConnections()
		return nil, c.classify(ctx, "read service root", err)
	}
	if !cfg.BasicAuth {
		has, err := hasSessions(ctx, api)
		if err != nil {
			hc.CloseIdleConnections()
			return nil, c.classify(ctx, "read service root", err)
		}
		if has {
			sess, err := api.WithContext(ctx).CloneWithSession()
			if err != nil {
				hc.CloseIdleConnections()
				return nil, c.classify(ctx, "log in", err)
			}
			api, c.session = sess, true
		}
	}
	c.api = api
	if err := c.findSystem(ctx); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// hasSessions says whether the service root links a sessions collection.
func hasSessions(ctx context.Context, api *gofish.APIClient) (bool, error) {
	resp, err := api.WithContext(ctx).Get("/redfish/v1/")
	if err != nil {
		return false, err
	}
	var root struct {
		Links struct {
			Sessions struct {
				ID string `json:"@odata.id"`
			}
		}
	}
	if err := decode(resp, &root); err != nil {
		return false, err
	}
	return root.Links.Sessions.ID != "", nil
}

// normalise checks the service's URL and reduces it to scheme://host[:port].
func normalise(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "", errors.New("redfish: URL is empty")
	}
	if !strings.Contains(raw, "://") {
		raw = "https://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("redfish: URL %q: %v", raw, err)
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return "", fmt.Errorf("redfish: URL %q: scheme must be https or http", raw)
	}
	if u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/" && u.Path != "/redfish/v1" && u.Path != "/redfish/v1/") {
		return "", fmt.Errorf("redfish: URL %q: want scheme://host[:port]", raw)
	}
	return u.Scheme + "://" + u.Host, nil
}

func httpClient(cfg Config) (*http.Client, error) {
	hc, err := bmchttp.Client(bmchttp.Options{CABundle: cfg.CABundle, Insecure: cfg.Insecure, Timeout: cfg.Timeout})
	if err != nil {
		return nil, fmt.Errorf("redfish: %w", err)
	}
	return hc, nil
}

func (c *Client) with(ctx context.Context) *gofish.APIClient { return c.api.WithContext(ctx) }

func (c *Client) findSystem(ctx context.Context) error {
	const op = "list systems"
	api := c.with(ctx)
	resp, err := api.Get("/redfish/v1/Systems")
	if err != nil {
		return c.classify(ctx, op, err)
	}
	var coll struct {
		Members []struct {
			ID string `json:"@odata.id"`
		}
	}
	err = decode(resp, &coll)
	if err != nil {
		return c.classify(ctx, op, err)
	}
	uris := map[string]string{}
	for _, m := range coll.Members {
		id := m.ID[strings.LastIndex(strings.TrimSuffix(m.ID, "/"), "/")+1:]
		id = strings.TrimSuffix(id, "/")
		c.systems = append(c.systems, id)
		uris[id] = m.ID
	}
	switch {
	case len(c.systems) == 0:
		return &Error{Kind: Failed, Op: op, URL: c.root, Detail: "the service has no system"}
	case c.cfg.SystemID == "" && len(c.systems) > 1:
		return &Error{Kind: Ambiguous, Op: op, URL: c.root,
			Detail: fmt.Sprintf("the service has %d systems (%s): choose one", len(c.systems), strings.Join(c.systems, ", "))}
	case c.cfg.SystemID == "":
		c.systemID = c.systems[0]
	case !slices.Contains(c.systems, c.cfg.SystemID):
		return &Error{Kind: Ambiguous, Op: op, URL: c.root,
			Detail: fmt.Sprintf("no system %q; the service has %s", c.cfg.SystemID, strings.Join(c.systems, ", "))}
	default:
		c.systemID = c.cfg.SystemID
	}
	c.systemURI = uris[c.systemID]
	return nil
}

// SystemID is the Id of the system the client acts on.
func (c *Client) SystemID() string { return c.systemID }

// Systems are the Ids of all the service's systems.
func (c *Client) Systems() []string { return slices.Clone(c.systems) }

// Close deletes the session (logs out) and closes idle connections.
func (c *Client) Close() error {
	if c.api == nil {
		return nil
	}
	defer c.api.HTTPClient.CloseIdleConnections()
	if !c.session {
		return nil
	}
	s, err := c.api.GetSession()
	if err != nil || s.ID == "" {
		return nil // no session to delete
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.Timeout)
	defer cancel()
	if err := c.with(ctx).Service.DeleteSession(s.ID); err != nil {
		return c.classify(ctx, "log out", err)
	}
	c.session = false
	return nil
}

// decode reads a JSON answer into v and closes its body.
func decode(resp *http.Response, v any) error {
	defer schemas.DeferredCleanupHTTPResponse(resp)
	return jsonDecode(resp, v)
}
