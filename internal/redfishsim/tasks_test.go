package redfishsim_test

import (
	"testing"

	"github.com/eimhq/eim/internal/redfishsim"
)

func TestTasks(t *testing.T) {
	m := redfishsim.NewMemory(redfishsim.MemoryConfig{})
	e := oneSystem(t, m, redfishsim.Faults{AsyncTasks: 2})
	a := e.do(t, "POST", sys1+"/Actions/ComputerSystem.Reset", map[string]any{"ResetType": "On"}, nil)
	mon := a.header.Get("Location")
	if a.status != 202 || mon == "" || field(a.body, "TaskState") != "Running" {
		t.Fatalf("async reset: got %d, Location %q, %s", a.status, mon, a.raw)
	}
	for i := 0; i < 2; i++ {
		if a := e.do(t, "GET", mon, nil, nil); a.status != 202 || field(a.body, "TaskState") != "Running" {
			t.Fatalf("poll %d: got %d %s, want 202 Running", i, a.status, a.raw)
		}
	}
	if a := e.do(t, "GET", mon, nil, nil); a.status != 200 || field(a.body, "TaskState") != "Completed" {
		t.Fatalf("done: got %d %s, want 200 Completed", a.status, a.raw)
	}
	task := e.get(t, "/redfish/v1/TaskService/Tasks/1")
	if task["TaskState"] != "Completed" {
		t.Errorf("the task resource: %v", task)
	}
	if got := e.get(t, sys1)["PowerState"]; got != "On" {
		t.Errorf("power state: got %v, want On", got)
	}
	if a := e.do(t, "GET", "/redfish/v1/TaskService/TaskMonitors/99", nil, nil); a.status != 404 {
		t.Errorf("unknown task: got %d", a.status)
	}

	// TaskException: accepted, not done, the task ends in Exception.
	e.bmc.SetFaults(redfishsim.Faults{AsyncTasks: 1, TaskException: true})
	a = e.do(t, "POST", sys1+"/Actions/ComputerSystem.Reset", map[string]any{"ResetType": "ForceOff"}, nil)
	mon = a.header.Get("Location")
	e.do(t, "GET", mon, nil, nil)
	if a := e.do(t, "GET", mon, nil, nil); a.status != 200 || field(a.body, "TaskState") != "Exception" || field(a.body, "TaskStatus") != "Critical" {
		t.Fatalf("failed task: got %d %s", a.status, a.raw)
	}
	if got := e.get(t, sys1)["PowerState"]; got != "On" {
		t.Errorf("after a failed task: got %v, want On (not done)", got)
	}
	// A bad request is still refused at once.
	if a := e.do(t, "POST", sys1+"/Actions/ComputerSystem.Reset", map[string]any{"ResetType": "Bogus"}, nil); a.status != 400 {
		t.Errorf("bad reset type with tasks: got %d", a.status)
	}
}
