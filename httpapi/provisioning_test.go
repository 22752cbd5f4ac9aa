package httpapi_test

import (
	"context"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/httpapi"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/sqlstore"
	"github.com/eimhq/eim/sqlstore/storetest"
)

// provEnv is an env with a host and instance in p1, and a function that
// writes the instance's workflow as the provisioning module would.
func provEnv(t *testing.T, dsn string) (*env, string, func(func(wf *eim.Workflow))) {
	t.Helper()
	return provEnvOpts(t, dsn, httpapi.Options{})
}

func provEnvOpts(t *testing.T, dsn string, opts httpapi.Options) (*env, string, func(func(wf *eim.Workflow))) {
	t.Helper()
	ctx := context.Background()
	var e *env
	if dsn == "" {
		e = newEnv(t, opts)
	} else {
		st, err := sqlstore.Open(ctx, dsn, sqlstore.Options{})
		if err != nil {
			t.Fatalf("open store: %v", err)
		}
		t.Cleanup(func() { st.Close() })
		e = newEnvWith(t, inventory.New(st, inventory.Options{}), nil, opts)
	}
	os, err := e.inv.Create(ctx, "p1", &eim.OS{Name: "os1", ImageURL: "https://x/y.raw", Sha256: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", SecurityFeature: "SECURITY_FEATURE_NONE"})
	if err != nil {
		t.Fatal(err)
	}
	h, err := e.inv.Create(ctx, "p1", &eim.Host{Name: "h", UUID: "4c4c4544-0000-4000-8000-000000000001"})
	if err != nil {
		t.Fatal(err)
	}
	in, err := e.inv.Create(ctx, "p1", &eim.Instance{Name: "i", Kind: eim.InstanceKindMetal, HostID: h.Base().ResourceID, OSID: os.Base().ResourceID})
	if err != nil {
		t.Fatal(err)
	}
	inst := in.Base().ResourceID
	var wfID string
	write := func(edit func(wf *eim.Workflow)) {
		err := e.inv.Store().Update(ctx, "p1", func(tx eim.Tx) error {
			if wfID == "" {
				wf := &eim.Workflow{InstanceID: inst, HostID: h.Base().ResourceID, Attempt: 1, State: eim.WorkflowRunning,
					Actions: []eim.WorkflowAction{{Name: "erase-disk"}, {Name: "stream-image"}, {Name: "reboot"}}}
				edit(wf)
				if err := tx.Create(ctx, wf); err != nil {
					return err
				}
				wfID = wf.ResourceID
				return nil
			}
			r, err := tx.Get(ctx, eim.KindWorkflow, wfID)
			if err != nil {
				return err
			}
			edit(r.(*eim.Workflow))
			return tx.Update(ctx, r)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return e, inst, write
}

func entry(seq int, state eim.ActionState, out string) eim.WorkflowLogEntry {
	return eim.WorkflowLogEntry{Seq: seq, Attempt: 1, Action: 1, Name: "stream-image", State: state, Output: out}
}

func TestProvisioningLog(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testProvisioningLog(t, "") })
	// On PostgreSQL the long poll is woken through LISTEN/NOTIFY.
	t.Run("postgres", func(t *testing.T) { testProvisioningLog(t, storetest.PostgresURL(t)) })
}

func testProvisioningLog(t *testing.T, dsn string) {
	e, inst, write := provEnv(t, dsn)
	path := "~/compute/instances/" + inst + "/provisioning_log"

	r := e.do(t, "GET", path, tokRO, nil)
	if r.status != 200 || r.str("workflowId") != "" || len(r.items("entries")) != 0 || r.num("next") != 0 {
		t.Fatalf("before the workflow: got %d %s", r.status, r.raw)
	}
	write(func(wf *eim.Workflow) {
		wf.Log = []eim.WorkflowLogEntry{entry(1, eim.ActionRunning, ""), entry(2, "", "downloading\n"), entry(3, "", "50%\n")}
	})
	r = e.do(t, "GET", path, tokRO, nil)
	if r.status != 200 || len(r.items("entries")) != 3 || r.num("next") != 3 || r.num("totalActions") != 3 || r.str("state") != string(eim.WorkflowRunning) {
		t.Fatalf("got %d %s", r.status, r.raw)
	}
	r = e.do(t, "GET", path+"?after=2", tokRO, nil)
	es := r.items("entries")
	if len(es) != 1 || es[0].(map[string]any)["output"] != "50%\n" || r.num("next") != 3 {
		t.Fatalf("after=2: got %s", r.raw)
	}

	// A poll with nothing new waits, then answers empty.
	r = e.do(t, "GET", path+"?after=3&wait=1", tokRO, nil)
	if r.status != 200 || len(r.items("entries")) != 0 || r.num("next") != 3 {
		t.Fatalf("empty poll: got %d %s", r.status, r.raw)
	}
	// A long poll answers as soon as an entry arrives (whether it arrives
	// before the poll starts watching or after).
	done := make(chan resp, 1)
	go func() { done <- e.do(t, "GET", path+"?after=3&wait=10", tokRO, nil) }()
	write(func(wf *eim.Workflow) { wf.Log = append(wf.Log, entry(4, eim.ActionSucceeded, "")) })
	select {
	case r = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("long poll did not answer")
	}
	es = r.items("entries")
	if r.status != 200 || len(es) != 1 || r.num("next") != 4 {
		t.Fatalf("long poll: got %d %s", r.status, r.raw)
	}

	// A finished workflow answers at once, with no entries to wait for.
	write(func(wf *eim.Workflow) { wf.State, wf.Message = eim.WorkflowFailed, "stream-image: sha256 mismatch" })
	start := time.Now()
	r = e.do(t, "GET", path+"?after=4&wait=10", tokRO, nil)
	if r.status != 200 || r.str("state") != string(eim.WorkflowFailed) || r.str("message") != "stream-image: sha256 mismatch" || len(r.items("entries")) != 0 {
		t.Fatalf("finished: got %d %s", r.status, r.raw)
	}
	if time.Since(start) > 8*time.Second {
		t.Fatalf("finished workflow: the poll waited")
	}
}

func TestProvisioningLogErrors(t *testing.T) {
	e, inst, _ := provEnv(t, "")
	path := "~/compute/instances/" + inst + "/provisioning_log"
	for _, c := range []struct {
		path, token string
		status      int
	}{
		{path + "?after=-1", tokRO, 400},
		{path + "?after=x", tokRO, 400},
		{path + "?wait=31", tokRO, 400},
		{path, "", 401},
		{path, tokRW2, 403},
		{"/v1/projects/p2/compute/instances/" + inst + "/provisioning_log", tokRW2, 404},
		{"~/compute/instances/inst-00000000/provisioning_log", tokRO, 404},
		{"~/compute/instances/nope/provisioning_log", tokRO, 400},
	} {
		if r := e.do(t, "GET", c.path, c.token, nil); r.status != c.status {
			t.Errorf("GET %s: got %d %s, want %d", c.path, r.status, r.raw, c.status)
		}
	}
}
