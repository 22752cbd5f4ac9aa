package sim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"

	"github.com/eimhq/eim"
)

// ProvisionedNode is a node that is already onboarded and provisioned: what
// it keeps after Day 0 to run on its installed OS. A nodes file holds one
// per line as a JSON object (JSON Lines); bench/seed writes it after
// seeding a server's store, and "eim-agent simulate --nodes-file" holds
// those nodes heartbeating without going through Day 0. The file holds
// client secrets: it is written with mode 0600.
type ProvisionedNode struct {
	HostID       string `json:"hostId"`
	Project      string `json:"project"`
	ClientID     string `json:"clientId"`
	ClientSecret string `json:"clientSecret"`
	// TokenURL is the token endpoint; "" means the server's own
	// (<agent URL>/oauth2/token).
	TokenURL string `json:"tokenUrl,omitempty"`
	Hostname string `json:"hostname,omitempty"`

	// Line is the node's line in the file it was read from.
	Line int `json:"-"`
}

// maxNodeLine bounds a line of a nodes file.
const maxNodeLine = 64 << 10

// ReadNodes reads a nodes file (see ProvisionedNode): one JSON object per
// line with hostId, project, clientId and clientSecret required, tokenUrl
// an absolute http(s) URL when set, no other fields, and every host once.
// Empty lines are skipped. Errors name the line.
func ReadNodes(r io.Reader) ([]ProvisionedNode, error) {
	br := bufio.NewReader(r)
	var nodes []ProvisionedNode
	seen := make(map[string]int)
	for line := 1; ; line++ {
		b, err := readLine(br)
		if errors.Is(err, io.EOF) && len(b) == 0 {
			break
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		b = bytes.TrimSpace(b)
		if len(b) == 0 {
			continue
		}
		n, err := parseNode(b)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		if prev, ok := seen[n.HostID]; ok {
			return nil, fmt.Errorf("line %d: host %s repeats line %d", line, n.HostID, prev)
		}
		seen[n.HostID] = line
		n.Line = line
		nodes = append(nodes, n)
	}
	if len(nodes) == 0 {
		return nil, errors.New("no nodes in the file")
	}
	return nodes, nil
}

// readLine returns the next line without its end, refusing one longer than
// maxNodeLine.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxNodeLine {
			return nil, fmt.Errorf("longer than %d bytes", maxNodeLine)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimSuffix(line, []byte("\n")), err
	}
}

// parseNode decodes and checks one line.
func parseNode(b []byte) (ProvisionedNode, error) {
	var n ProvisionedNode
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&n); err != nil {
		return n, fmt.Errorf("not a node's JSON object: %w", err)
	}
	if dec.More() {
		return n, errors.New("more than one JSON value")
	}
	switch {
	case n.HostID == "":
		return n, errors.New("hostId is required")
	case !eim.ValidID(eim.KindHost, n.HostID):
		return n, fmt.Errorf("hostId %q is not a host ID (host- and 8 hex digits)", n.HostID)
	case n.Project == "":
		return n, errors.New("project is required")
	case n.ClientID == "":
		return n, errors.New("clientId is required")
	case n.ClientSecret == "":
		return n, errors.New("clientSecret is required")
	}
	if n.TokenURL != "" {
		u, err := url.Parse(n.TokenURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return n, fmt.Errorf("tokenUrl %q is not an absolute http(s) URL", n.TokenURL)
		}
	}
	return n, nil
}

// WriteNodes writes nodes as ReadNodes reads them.
func WriteNodes(w io.Writer, nodes []ProvisionedNode) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for _, n := range nodes {
		if err := enc.Encode(n); err != nil {
			return err
		}
	}
	return bw.Flush()
}
