package provisioning

import (
	"strings"
	"testing"

	"github.com/eimhq/eim"
)

func TestAppendLogCap(t *testing.T) {
	const limit = 4096
	wf := &eim.Workflow{}
	chunk := strings.Repeat("x", 500)
	transitions := 0
	for i := range 100 {
		appendLog(wf, limit, eim.WorkflowLogEntry{Action: i % 7, Output: chunk})
		if i%10 == 0 {
			appendLog(wf, limit, eim.WorkflowLogEntry{Action: i % 7, State: eim.ActionRunning, Message: "step"})
			transitions++
		}
	}
	size, trans, prev := 0, 0, 0
	for _, e := range wf.Log {
		size += entrySize(&e)
		if e.State != "" {
			trans++
		}
		if e.Seq <= prev {
			t.Fatalf("seq %d after %d", e.Seq, prev)
		}
		prev = e.Seq
	}
	if trans != transitions {
		t.Fatalf("got %d transitions, want all %d", trans, transitions)
	}
	if size > limit {
		t.Fatalf("log is %d bytes, over the cap %d", size, limit)
	}
	last := wf.Log[len(wf.Log)-1]
	if last.Seq != 110 || last.Output != chunk {
		t.Fatalf("got last entry seq %d output %d bytes, want the newest output (seq 110)", last.Seq, len(last.Output))
	}
	if wf.Log[0].Seq != 2 || wf.Log[0].State == "" {
		t.Fatalf("got first entry %+v, want the oldest transition (seq 2)", wf.Log[0])
	}
}
