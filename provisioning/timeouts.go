package provisioning

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/eimhq/eim"
)

// actionKeys are what Options.ActionTimeouts may name: the actions of a
// rendered workflow, by name, and the action types.
var actionKeys = []string{
	"erase-disk", "stream-image", "write-meta-data", "write-user-data",
	"write-agent-config", "set-boot-order", "reboot",
	eim.ActionWriteFile,
}

// Bounds of an action timeout: shorter than a minute fails healthy nodes;
// longer than two days is no timeout at all.
const (
	minActionTimeout = time.Minute
	maxActionTimeout = 48 * time.Hour
)

// ParseActionTimeout parses "NAME=DURATION" ("stream-image=3h"), the form
// of eim server's --action-timeout, for Options.ActionTimeouts.
func ParseActionTimeout(s string) (name string, d time.Duration, err error) {
	name, v, ok := strings.Cut(s, "=")
	if !ok || name == "" || v == "" {
		return "", 0, fmt.Errorf("%q: want NAME=DURATION, e.g. stream-image=3h", s)
	}
	if !slices.Contains(actionKeys, name) {
		return "", 0, fmt.Errorf("%q: no action is named %s (one of %s)", s, name, strings.Join(actionKeys, ", "))
	}
	d, err = time.ParseDuration(v)
	if err != nil {
		return "", 0, fmt.Errorf("%q: %s is not a duration (e.g. 45m, 3h)", s, v)
	}
	if d < minActionTimeout || d > maxActionTimeout {
		return "", 0, fmt.Errorf("%q: %s is outside %s..%s", s, d, minActionTimeout, maxActionTimeout)
	}
	return name, d, nil
}
