package provisioning

import (
	"context"
	"fmt"
	"unicode/utf8"

	"connectrpc.com/connect"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
)

// ReportIn implements hostv1connect.HostServiceHandler: the agent on the
// installed OS calls home. The first call after a successful workflow
// makes the instance current RUNNING; every call keeps the host's status
// "Running". Nothing is written when nothing changes, so a fleet reporting
// in every few seconds costs reads only.
func (s *Service) ReportIn(ctx context.Context, req *connect.Request[hostv1.ReportInRequest]) (*connect.Response[hostv1.ReportInResponse], error) {
	n, err := s.caller(ctx)
	if err != nil {
		return nil, err
	}
	m := req.Msg
	if len(m.Hostname) > 253 || !utf8.ValidString(m.Hostname) {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("hostname: not a valid host name"))
	}
	write := true
	if !s.direct {
		var st *nodeState
		err = s.store.View(ctx, n.Project, func(tx eim.Tx) error {
			st, err = s.load(ctx, tx, n, true)
			return err
		})
		write = err == nil && reportInChanges(st, m)
	}
	if write {
		err = s.batch.DoIn(ctx, n.Project, func(tx eim.Tx) error {
			st, err := s.load(ctx, tx, n, true)
			if err != nil || !reportInChanges(st, m) {
				return err
			}
			return s.applyReportIn(ctx, tx, st, m)
		})
	}
	if err != nil {
		return nil, s.rpcError(ctx, "report in", err)
	}
	return connect.NewResponse(&hostv1.ReportInResponse{HeartbeatIntervalSeconds: heartbeatInterval}), nil
}

// provisioned reports whether st's instance finished its workflow and is
// not yet current RUNNING.
func provisioned(st *nodeState) bool {
	return st.instance != nil && !parked(st.instance) && st.workflow != nil &&
		st.workflow.State == eim.WorkflowSucceeded && st.instance.CurrentState != eim.InstanceStateRunning
}

func reportInChanges(st *nodeState, m *hostv1.ReportInRequest) bool {
	h := st.host
	return provisioned(st) || h.HostStatus != "Running" || h.HostStatusIndicator != eim.StatusIdle ||
		(m.Hostname != "" && h.Hostname != m.Hostname)
}

func (s *Service) applyReportIn(ctx context.Context, tx eim.Tx, st *nodeState, m *hostv1.ReportInRequest) error {
	now := s.now()
	if provisioned(st) {
		if err := inventory.SetInstanceStatus(ctx, tx, st.instance, eim.InstanceStateRunning, inventory.StatusAt("Running", eim.StatusIdle, now)); err != nil {
			return err
		}
	}
	h := st.host
	if h.HostStatus != "Running" || h.HostStatusIndicator != eim.StatusIdle {
		if err := inventory.SetHostStatus(ctx, tx, h, inventory.StatusAt("Running", eim.StatusIdle, now)); err != nil {
			return err
		}
	}
	if m.Hostname != "" && h.Hostname != m.Hostname {
		if err := inventory.SetHostname(ctx, tx, h, m.Hostname); err != nil {
			return err
		}
	}
	return nil
}
