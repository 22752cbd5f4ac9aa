package redfishsim

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Asynchronous actions (DSP0266 "Asynchronous operations"): with
// Faults.AsyncTasks, a reset or a virtual media action that the BMC accepts
// answers 202 Accepted with a Task resource and, in Location, a task monitor
// URI. The monitor answers 202 with the task Running a number of times, then
// 200 with the task Completed (or Exception, with Faults.TaskException,
// where the action is not done at all), as bmcweb's task monitors do.

// task is one asynchronous operation.
type task struct {
	id      string
	name    string
	polls   int // monitor GETs left before the task is done
	failure *apiError
}

func taskPath(id string) string    { return "/redfish/v1/TaskService/Tasks/" + id }
func monitorPath(id string) string { return "/redfish/v1/TaskService/TaskMonitors/" + id }

// asyncTask registers a task for an accepted action when the faults ask for
// one; nil means answer synchronously.
func (b *BMC) asyncTask(name string, failure *apiError) *task {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.faults.AsyncTasks <= 0 {
		return nil
	}
	b.taskSeq++
	t := &task{id: strconv.Itoa(b.taskSeq), name: name, polls: b.faults.AsyncTasks, failure: failure}
	if b.tasks == nil {
		b.tasks = map[string]*task{}
	}
	b.tasks[t.id] = t
	return t
}

// taskFailing says whether the next accepted action must end in an
// Exception instead of being done (Faults.TaskException).
func (b *BMC) taskFailing() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.faults.AsyncTasks > 0 && b.faults.TaskException
}

func errTaskAborted(name string) *apiError {
	return newError(http.StatusInternalServerError, message{id: "TaskAborted",
		text:       fmt.Sprintf("The task with Id '%s' has been aborted.", name),
		args:       []string{name},
		severity:   "Critical",
		resolution: "None."})
}

// writeAccepted answers 202 for t.
func writeAccepted(w http.ResponseWriter, t *task) {
	w.Header().Set("Location", monitorPath(t.id))
	writeJSON(w, http.StatusAccepted, t.resource("Running"))
}

func (t *task) resource(state string) map[string]any {
	status, msgs := "OK", []any{}
	if state == "Exception" {
		status = "Critical"
		for _, m := range t.failure.msgs {
			msgs = append(msgs, m.json())
		}
	}
	return map[string]any{
		"@odata.id":   taskPath(t.id),
		"@odata.type": "#Task.v1_7_0.Task",
		"Id":          t.id,
		"Name":        "Task " + t.id + ": " + t.name,
		"TaskState":   state,
		"TaskStatus":  status,
		"TaskMonitor": monitorPath(t.id),
		"Messages":    msgs,
	}
}

// state is the task's state without counting a poll.
func (t *task) state() string {
	switch {
	case t.polls > 0:
		return "Running"
	case t.failure != nil:
		return "Exception"
	}
	return "Completed"
}

// routeTasks serves TaskService/Tasks/{id} and TaskService/TaskMonitors/{id}.
func (b *BMC) routeTasks(w http.ResponseWriter, method string, seg []string) *apiError {
	if len(seg) != 2 || (seg[0] != "Tasks" && seg[0] != "TaskMonitors") {
		return errNotFound("Resource", "TaskService/"+strings.Join(seg, "/"))
	}
	if method != http.MethodGet {
		return allow(w, method, "GET")
	}
	b.mu.Lock()
	t := b.tasks[seg[1]]
	var state string
	if t != nil {
		state = t.state()
		if seg[0] == "TaskMonitors" && t.polls > 0 {
			t.polls--
		}
	}
	b.mu.Unlock()
	if t == nil {
		return errNotFound("Task", seg[1])
	}
	if seg[0] == "TaskMonitors" && state == "Running" {
		w.Header().Set("Location", monitorPath(t.id))
		writeJSON(w, http.StatusAccepted, t.resource(state))
		return nil
	}
	writeResource(w, t.resource(state))
	return nil
}
