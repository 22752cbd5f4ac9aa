package agent

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	maintenancev1 "github.com/eimhq/eim/proto/eim/maintenance/v1"
)

// outageCommands is a TEST DOUBLE of apt-get: it records the commands.
type outageCommands struct {
	mu   sync.Mutex
	cmds []string
}

func (c *outageCommands) run(_ context.Context, name string, args ...string) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cmds = append(c.cmds, name+" "+strings.Join(args, " "))
	return nil, nil
}

// Through a server outage the node still updates in its window, from the
// plan it kept on disk; the reports wait, on disk, for the server. A
// restarted agent finds both.
func TestMaintenanceThroughOutage(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 11, 23, 2, 30, 0, 0, time.UTC)
	plan := &maintenancev1.GetPlanResponse{Version: "v1",
		Windows: []*maintenancev1.Window{{ScheduleId: "repeatedsche-00000001", Purpose: maintenancev1.Window_PURPOSE_OS_UPDATE,
			When: &maintenancev1.Window_Repeated{Repeated: &maintenancev1.Repeated{DurationSeconds: 3600,
				Minutes: "0", Hours: "2", DayOfMonth: "*", Month: "*", DayOfWeek: "*"}}}},
		Policy:    &maintenancev1.UpdatePolicy{Id: "osupdatepolicy-00000001", Kind: maintenancev1.UpdatePolicy_KIND_TARGET, Packages: "curl"},
		CurrentOs: &maintenancev1.OperatingSystem{Id: "os-00000001", Type: maintenancev1.OperatingSystem_TYPE_MUTABLE},
	}
	newNode := func(at time.Time) (*Node, *outageCommands) {
		cmds := &outageCommands{}
		// The server is down: nothing listens on port 1.
		n := &Node{Client: &http.Client{Timeout: time.Second}, Config: NodeConfig{URL: "https://127.0.0.1:1", ClientID: "c", ClientSecret: "s"},
			StateDir: dir, BootID: "b1", Now: func() time.Time { return at },
			Updaters: &Updaters{Mutable: &Apt{Run: cmds.run, Root: t.TempDir()}}}
		n.init()
		m, err := loadMaintenance(dir)
		if err != nil {
			t.Fatal(err)
		}
		n.maint = m
		return n, cmds
	}

	// Learned while the server was up; then it went down.
	n, _ := newNode(now.Add(-3 * time.Hour))
	if err := n.maint.setPlan(plan); err != nil {
		t.Fatal(err)
	}
	n.maintain(t.Context())

	// The agent restarts during the outage, before the window: nothing.
	n, cmds := newNode(now.Add(-time.Hour))
	n.maintain(t.Context())
	if len(cmds.cmds) != 0 {
		t.Fatalf("updated outside the window: %v", cmds.cmds)
	}
	// In the window (02:00–03:00 UTC): the update runs from the kept plan.
	n, cmds = newNode(now)
	if n.maint.plan.GetVersion() != "v1" {
		t.Fatal("the plan was not kept across the restart")
	}
	n.maintain(t.Context())
	if got := strings.Join(cmds.cmds, "\n"); !strings.Contains(got, "install -- curl") {
		t.Fatalf("commands %q, want the policy's package installed", got)
	}
	// Its reports wait on disk, in order.
	n, cmds = newNode(now.Add(time.Minute))
	var got []string
	for _, r := range n.maint.st.Reports {
		got = append(got, status(r.Status).String())
	}
	if strings.Join(got, ",") != "STATUS_STARTED,STATUS_UPDATED" {
		t.Fatalf("queued reports %v", got)
	}
	// Applied: not applied again in the same window.
	n.maintain(t.Context())
	if len(cmds.cmds) != 0 {
		t.Fatalf("applied again: %v", cmds.cmds)
	}
	if _, err := os.Stat(filepath.Join(dir, maintenanceFile)); err != nil {
		t.Fatal(err)
	}
	if len(n.maint.st.Reports) != 2 {
		t.Fatalf("%d reports queued after a completed update, want no UP_TO_DATE on top", len(n.maint.st.Reports))
	}

	// A new plan whose update fails: tried once in the window, not at
	// every check; tried again in the next window.
	failing := &outageCommands{}
	plan2 := proto.Clone(plan).(*maintenancev1.GetPlanResponse)
	plan2.Version, plan2.Policy.Packages = "v2", "broken-package"
	n.maint.setPlan(plan2)
	n.Updaters.Mutable = &Apt{Run: func(ctx context.Context, name string, args ...string) ([]byte, error) {
		failing.run(ctx, name, args...)
		if name == "apt-get" && len(args) > 0 && args[len(args)-1] == "broken-package" {
			return nil, errors.New("exit status 100")
		}
		return nil, nil
	}, Root: t.TempDir()}
	n.maintain(t.Context())
	n.maintain(t.Context())
	if got := strings.Count(strings.Join(failing.cmds, "\n"), "broken-package"); got != 1 {
		t.Fatalf("the failing update ran %d times in one window, want 1", got)
	}
	at := now.Add(24 * time.Hour) // the next night's window
	n.Now = func() time.Time { return at }
	n.maintain(t.Context())
	if got := strings.Count(strings.Join(failing.cmds, "\n"), "broken-package"); got != 2 {
		t.Fatalf("the failing update ran %d times after the next window opened, want 2", got)
	}
}
