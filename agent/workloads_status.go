package agent

import (
	"context"
	"slices"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/eimhq/eim/agent/pods"
	workloadsv1 "github.com/eimhq/eim/proto/eim/workloads/v1"
)

// phaseOf is the reported phase of a pod's status.
func phaseOf(s pods.Status) workloadsv1.WorkloadStatus_Phase {
	switch s {
	case pods.Deploying:
		return workloadsv1.WorkloadStatus_PHASE_DEPLOYING
	case pods.Running:
		return workloadsv1.WorkloadStatus_PHASE_RUNNING
	case pods.Degraded:
		return workloadsv1.WorkloadStatus_PHASE_DEGRADED
	case pods.Exited:
		return workloadsv1.WorkloadStatus_PHASE_EXITED
	case pods.Error:
		return workloadsv1.WorkloadStatus_PHASE_ERROR
	case pods.Stopped:
		return workloadsv1.WorkloadStatus_PHASE_STOPPED
	}
	return workloadsv1.WorkloadStatus_PHASE_UNSPECIFIED
}

// workloadStatuses is the status of every workload of the set and of
// every pod being removed, by name.
func (n *Node) workloadStatuses(infos []pods.Info) []*workloadsv1.WorkloadStatus {
	e := n.edge
	byName := map[string]pods.Info{}
	for _, info := range infos {
		byName[info.Workload] = info
	}
	var out []*workloadsv1.WorkloadStatus
	inSet := map[string]bool{}
	for _, w := range e.set {
		inSet[w.Name] = true
		ws := &workloadsv1.WorkloadStatus{Name: w.Name, Revision: w.Revision}
		a := e.apply[w.Name]
		if a != nil && a.revision == w.Revision {
			ws.LastError = a.err
		}
		info, ok := byName[w.Name]
		switch {
		case !ok && ws.LastError != "":
			ws.Phase = workloadsv1.WorkloadStatus_PHASE_ERROR
		case !ok:
			ws.Phase = workloadsv1.WorkloadStatus_PHASE_DEPLOYING
		case info.Revision != w.Revision:
			// The old revision runs until the new one replaces it.
			ws.Revision = info.Revision
			ws.Phase = workloadsv1.WorkloadStatus_PHASE_DEPLOYING
			if ws.LastError != "" {
				ws.Phase = workloadsv1.WorkloadStatus_PHASE_ERROR
			}
			ws.Containers = containerStatuses(info)
		default:
			ws.Phase = phaseOf(info.Status)
			ws.Containers = containerStatuses(info)
		}
		out = append(out, ws)
	}
	for _, info := range infos {
		if inSet[info.Workload] {
			continue
		}
		out = append(out, &workloadsv1.WorkloadStatus{Name: info.Workload, Revision: info.Revision,
			Phase: workloadsv1.WorkloadStatus_PHASE_REMOVING, LastError: e.removing[info.Workload], Containers: containerStatuses(info)})
	}
	slices.SortFunc(out, func(a, b *workloadsv1.WorkloadStatus) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}

func containerStatuses(info pods.Info) []*workloadsv1.ContainerStatus {
	var out []*workloadsv1.ContainerStatus
	for _, c := range info.Containers {
		cs := &workloadsv1.ContainerStatus{Name: c.Name, State: c.State, ExitCode: int32(c.ExitCode),
			Restarts: int32(c.Restarts), Error: truncate(c.Error, maxLastError)}
		if !c.Started.IsZero() && c.Started.Unix() > 0 {
			cs.StartedTime = c.Started.Unix()
		}
		if !c.Finished.IsZero() && c.Finished.Unix() > 0 && c.State != "running" {
			cs.FinishedTime = c.Finished.Unix()
		}
		out = append(out, cs)
	}
	return out
}

// reportWorkloads sends the status when it changed since the last report
// delivered, or when the server asked for it.
func (n *Node) reportWorkloads(ctx context.Context, infos []pods.Info) {
	e := n.edge
	req := &workloadsv1.ReportStatusRequest{Version: e.st.Applied, Workloads: n.workloadStatuses(infos)}
	now := n.now().Unix()
	dirty := false
	names := map[string]bool{}
	for _, ws := range req.Workloads {
		names[ws.Name] = true
		p, ok := e.st.Phases[ws.Name]
		if !ok || p.Phase != int32(ws.Phase) {
			p = edgePhase{Phase: int32(ws.Phase), Since: now}
			e.st.Phases[ws.Name] = p
			dirty = true
		}
		ws.TransitionTime = p.Since
	}
	for name := range e.st.Phases {
		if !names[name] {
			delete(e.st.Phases, name)
			dirty = true
		}
	}
	if dirty {
		if err := e.save(); err != nil {
			n.log().Warn("cannot record the workloads state", "err", err)
		}
	}
	e.mu.Lock()
	full := e.wantFull
	e.mu.Unlock()
	if !full && e.lastSent != nil && proto.Equal(e.lastSent, req) {
		return
	}
	_, err := n.wc.ReportStatus(ctx, connect.NewRequest(req))
	if err != nil {
		if ctx.Err() == nil {
			n.log().Warn("workload status not delivered; sent again at the next check", "err", err)
		}
		return
	}
	e.lastSent = req
	if full {
		e.mu.Lock()
		e.wantFull = false
		e.mu.Unlock()
	}
}

// answerLogs answers the pending log requests, each once.
func (n *Node) answerLogs(ctx context.Context, infos []pods.Info) {
	e := n.edge
	for len(e.st.LogsPending) > 0 {
		var r workloadsv1.LogRequest
		if err := protojson.Unmarshal(e.st.LogsPending[0], &r); err != nil {
			e.st.LogsPending = e.st.LogsPending[1:]
			continue
		}
		req := n.logsOf(ctx, &r, infos)
		_, err := n.wc.ReportLogs(ctx, connect.NewRequest(req))
		switch code := connect.CodeOf(err); {
		case err == nil:
		case code == connect.CodeInvalidArgument || code == connect.CodeNotFound || code == connect.CodeFailedPrecondition || code == connect.CodeUnimplemented:
			n.log().Warn("log request's answer refused; dropped", "id", r.Id, "err", err)
		default:
			if ctx.Err() == nil {
				n.log().Warn("log request not answered; tried again at the next check", "id", r.Id, "err", err)
			}
			return
		}
		e.st.LogsPending = e.st.LogsPending[1:]
		e.st.LogsDone = append(e.st.LogsDone, r.Id)
		if len(e.st.LogsDone) > maxLogIDs {
			e.st.LogsDone = e.st.LogsDone[len(e.st.LogsDone)-maxLogIDs:]
		}
		if err := e.save(); err != nil {
			n.log().Warn("cannot record the workloads state", "err", err)
		}
	}
}

// logsOf reads the tails r asks for: each container's last lines, at
// most 64 KiB (the end kept).
func (n *Node) logsOf(ctx context.Context, r *workloadsv1.LogRequest, infos []pods.Info) *workloadsv1.ReportLogsRequest {
	out := &workloadsv1.ReportLogsRequest{Id: r.Id}
	var ctrs []string
	if r.Container != "" {
		ctrs = []string{r.Container}
	} else {
		for _, info := range infos {
			if info.Workload == r.Workload {
				for _, c := range info.Containers {
					ctrs = append(ctrs, c.Name)
				}
			}
		}
		if len(ctrs) == 0 {
			out.Error = "workload " + r.Workload + " has no pod on this device"
			return out
		}
	}
	tail := int(r.TailLines)
	if tail <= 0 {
		tail = 100
	}
	for _, c := range ctrs {
		b, err := n.Pods.Logs(ctx, r.Workload, c, tail)
		if err != nil {
			out.Error = truncate(err.Error(), maxLastError)
			continue
		}
		if len(b) > maxLogBytes {
			b = b[len(b)-maxLogBytes:]
		}
		out.Logs = append(out.Logs, &workloadsv1.ContainerLog{Container: c, Text: b})
	}
	return out
}
