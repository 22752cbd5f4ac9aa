package provisioning

import "github.com/eimhq/eim"

// entryOverhead approximates the stored size of a log entry beyond its
// texts (JSON keys, time, numbers).
const entryOverhead = 96

func entrySize(e *eim.WorkflowLogEntry) int {
	return entryOverhead + len(e.Name) + len(e.Message) + len(e.Output)
}

// appendLog appends e to wf's log with the next sequence number, then drops
// the oldest output entries until the log fits in limit bytes. Transitions
// (entries without output) are always kept; followers see the dropped
// output as a gap in the sequence numbers.
func appendLog(wf *eim.Workflow, limit int, e eim.WorkflowLogEntry) {
	e.Seq = 1
	if n := len(wf.Log); n > 0 {
		e.Seq = wf.Log[n-1].Seq + 1
	}
	wf.Log = append(wf.Log, e)
	size := 0
	for i := range wf.Log {
		size += entrySize(&wf.Log[i])
	}
	if size <= limit {
		return
	}
	kept := wf.Log[:0]
	for i := range wf.Log {
		le := wf.Log[i]
		// The newest entry stays even when it is output: a follower must
		// see the latest progress.
		if size > limit && le.Output != "" && i < len(wf.Log)-1 {
			size -= entrySize(&le)
			continue
		}
		kept = append(kept, le)
	}
	clear(wf.Log[len(kept):])
	wf.Log = kept
}
