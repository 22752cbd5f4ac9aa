package provisioning

import (
	"context"
	"fmt"
	"time"
	"unicode/utf8"

	"connectrpc.com/connect"

	"github.com/eimhq/eim"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
)

// ReportIn implements hostv1connect.HostServiceHandler: the agent on the
// installed OS calls home. The first call after a successful workflow
// makes the instance current RUNNING; every call keeps the host's status
// "Running". Nothing is written when nothing changes, so a fleet reporting
// in every few seconds costs reads only: one indexed read of the host's
// status and name and its instance's and workflow's states
// (eim.NodeReports), never the whole host or the workflow's log.
func (s *Service) ReportIn(ctx context.Context, req *connect.Request[hostv1.ReportInRequest]) (*connect.Response[hostv1.ReportInResponse], error) {
	n, err := s.caller(ctx)
	if err != nil {
		return nil, err
	}
	m := req.Msg
	if len(m.Hostname) > eim.MaxHostname || !utf8.ValidString(m.Hostname) {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("hostname: not a valid host name"))
	}
	now := s.now()
	decide := func(st eim.NodeState) eim.NodeChange { return reportIn(st, m.Hostname, now) }
	write := true
	if !s.direct {
		var st eim.NodeState
		st, err = s.reports.NodeState(ctx, n.Project, n.HostID)
		write = err == nil && !decide(st).Empty()
	}
	if write {
		_, err = s.reports.ReportIn(ctx, n.Project, n.HostID, decide)
	}
	if err != nil {
		return nil, s.rpcError(ctx, "report in", err)
	}
	return connect.NewResponse(&hostv1.ReportInResponse{HeartbeatIntervalSeconds: heartbeatInterval}), nil
}

// provisioned reports whether st's instance finished its workflow and is
// not yet current RUNNING.
func provisioned(st eim.NodeState) bool {
	in, wf := st.Instance, st.Workflow
	return in != nil && !parkedState(in.DesiredState) && wf != nil &&
		wf.State == eim.WorkflowSucceeded && in.CurrentState != eim.InstanceStateRunning
}

// reportIn is what a call of the installed OS changes of st: the instance
// current RUNNING once its workflow succeeded, the host's status
// "Running", and the host name the node reports (none: kept).
func reportIn(st eim.NodeState, hostname string, now time.Time) eim.NodeChange {
	var ch eim.NodeChange
	running := eim.StatusValue{Text: "Running", Indicator: eim.StatusIdle, Timestamp: uint64(now.Unix())}
	if provisioned(st) {
		ch.Running = &running
	}
	if st.HostStatus.Text != "Running" || st.HostStatus.Indicator != eim.StatusIdle {
		ch.HostStatus = &running
	}
	if hostname != "" && st.Hostname != hostname {
		ch.Hostname = &hostname
	}
	return ch
}
