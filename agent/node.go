package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"connectrpc.com/connect"

	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
	"github.com/eimhq/eim/proto/eim/host/v1/hostv1connect"
)

// NodeConfig is the agent's configuration on the installed OS
// (/etc/eim/agent.json), written by the write-agent-config action.
type NodeConfig struct {
	URL          string `json:"url"`
	CACertPEM    string `json:"caCertPem"`
	ClientID     string `json:"clientId"`
	ClientSecret string `json:"clientSecret"`
	HostID       string `json:"hostId"`
	Project      string `json:"project"`
	// TokenURL is the token endpoint; "" means URL + "/oauth2/token".
	TokenURL string `json:"tokenUrl,omitempty"`
}

// Marshal returns the configuration as indented JSON.
func (c NodeConfig) Marshal() ([]byte, error) {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("node config: %w", err)
	}
	return append(b, '\n'), nil
}

// LoadNodeConfig reads and checks a node configuration file.
func LoadNodeConfig(path string) (NodeConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return NodeConfig{}, fmt.Errorf("read node config: %w", err)
	}
	var c NodeConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return NodeConfig{}, fmt.Errorf("node config %s: %w", path, err)
	}
	if c.URL == "" || c.ClientID == "" || c.ClientSecret == "" {
		return NodeConfig{}, fmt.Errorf("node config %s: url, clientId and clientSecret are required", path)
	}
	return c, nil
}

// Node is the agent on the installed OS: it reports in and, for now, keeps
// reporting in at the interval the server sets.
type Node struct {
	Client  *http.Client // trusts the server's CA (Dial with Config.CACertPEM)
	Config  NodeConfig
	Logger  *slog.Logger
	Backoff Backoff

	AgentVersion string
	Hostname     string
	OSRelease    string
	BootID       string
	// OnReportIn, if set, is called after every accepted ReportIn.
	OnReportIn func(*hostv1.ReportInResponse)
	Now        func() time.Time
	Wait       func(ctx context.Context, d time.Duration) error

	tokens *tokens
	hc     hostv1connect.HostServiceClient
}

// ErrCredentialsRevoked is returned by Node when the token endpoint refuses
// the node's credentials: the host was invalidated or deleted, or onboarded
// again elsewhere.
var ErrCredentialsRevoked = errors.New("node credentials refused (host invalidated, deleted or re-onboarded)")

func (n *Node) init() {
	if n.hc != nil {
		return
	}
	now := n.Now
	if now == nil {
		now = time.Now
	}
	tokenURL := n.Config.TokenURL
	if tokenURL == "" {
		tokenURL = strings.TrimSuffix(n.Config.URL, "/") + "/oauth2/token"
	}
	n.tokens = &tokens{client: n.Client, url: tokenURL, clientID: n.Config.ClientID, clientSecret: n.Config.ClientSecret, now: now}
	n.hc = hostv1connect.NewHostServiceClient(n.Client, strings.TrimSuffix(n.Config.URL, "/"), connect.WithInterceptors(n.tokens.interceptor()))
}

func (n *Node) log() *slog.Logger {
	if n.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return n.Logger
}

// ReportIn calls ReportIn once (getting a token if needed).
func (n *Node) ReportIn(ctx context.Context) (*hostv1.ReportInResponse, error) {
	n.init()
	v := n.AgentVersion
	if v == "" {
		v = Version
	}
	resp, err := n.hc.ReportIn(ctx, connect.NewRequest(&hostv1.ReportInRequest{
		AgentVersion: v, Hostname: n.Hostname, OsRelease: n.OSRelease, BootId: n.BootID,
	}))
	if errors.Is(err, errInvalidClient) {
		return nil, ErrCredentialsRevoked
	}
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}

// Run reports in, with back-off on errors, and then again every heartbeat
// interval until ctx ends. It returns ErrCredentialsRevoked when the
// credentials stop working for good.
func (n *Node) Run(ctx context.Context) error {
	wait := n.Wait
	if wait == nil {
		wait = sleep
	}
	r := retrier{b: n.Backoff}
	for {
		resp, err := n.ReportIn(ctx)
		var d time.Duration
		switch {
		case errors.Is(err, ErrCredentialsRevoked):
			return err
		case err != nil:
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			d = r.next(err)
			n.log().Warn("report in failed", "err", err, "retry_in", d)
		default:
			r.reset()
			if n.OnReportIn != nil {
				n.OnReportIn(resp)
			}
			d = time.Duration(resp.GetHeartbeatIntervalSeconds()) * time.Second
			if d <= 0 {
				d = 10 * time.Second
			}
		}
		if err := wait(ctx, d); err != nil {
			return err
		}
	}
}
