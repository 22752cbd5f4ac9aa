package workloads

import (
	"context"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"connectrpc.com/connect"

	"github.com/eimhq/eim"
	workloadsv1 "github.com/eimhq/eim/proto/eim/workloads/v1"
	"github.com/eimhq/eim/proto/eim/workloads/v1/workloadsv1connect"
	"github.com/eimhq/eim/southbound"
)

// The devices' WorkloadService (proto/eim/workloads/v1), behind node
// authentication: the host and project are the token's.

var _ workloadsv1connect.WorkloadServiceHandler = (*Service)(nil)

// Bounds of what a device sends.
const (
	maxReported  = 256      // workloads in a status report
	maxText      = 1024     // an error text
	maxLogBytes  = 64 << 10 // one container's log tail
	maxChanges   = 1000     // files in one grant request
	maxFilePath  = 1024
	maxFailures  = 1000
	maxErrorsKep = 20 // upload errors kept in a status
)

// GetWorkloads implements workloadsv1connect.WorkloadServiceHandler.
func (s *Service) GetWorkloads(ctx context.Context, req *connect.Request[workloadsv1.GetWorkloadsRequest]) (*connect.Response[workloadsv1.GetWorkloadsResponse], error) {
	n, err := southbound.Caller(ctx)
	if err != nil {
		return nil, err
	}
	dw, err := s.o.Store.DeviceWorkloads(ctx, n.Project, n.HostID)
	if err != nil {
		return nil, southbound.Error(ctx, s.log, "workloads: get", err)
	}
	ver := formatVersion(dw.Version)
	out := &workloadsv1.GetWorkloadsResponse{Version: ver}
	have, haveErr := strconv.ParseInt(req.Msg.Version, 10, 64)
	if haveErr == nil && have > dw.StatusVersion && !dw.StatusWanted {
		// The device applied a version whose status the store does not
		// hold (a report lost, a restored database): ask for it in full.
		if err := s.o.Store.WantEdgeDeviceStatus(ctx, n.Project, n.HostID); err != nil {
			return nil, southbound.Error(ctx, s.log, "workloads: want status", err)
		}
	}
	if req.Msg.Version != "" && req.Msg.Version == ver {
		out.Unchanged = true
		return connect.NewResponse(out), nil
	}
	if haveErr == nil && have > dw.Version {
		// The device saw a newer version than this store has: never send
		// it back an older set (a restored database, say).
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("version %d is newer than the server's %d: keep what runs", have, dw.Version))
	}
	for _, t := range dw.Targets {
		w, err := render(s.o.Key, n.Project, t)
		if err != nil {
			return nil, southbound.Error(ctx, s.log, "workloads: render", err)
		}
		out.Workloads = append(out.Workloads, w)
	}
	for _, l := range dw.Logs {
		out.LogRequests = append(out.LogRequests, &workloadsv1.LogRequest{Id: l.ID, Workload: l.Workload, Container: l.Container, TailLines: l.Tail})
	}
	return connect.NewResponse(out), nil
}

var phases = map[workloadsv1.WorkloadStatus_Phase]string{
	workloadsv1.WorkloadStatus_PHASE_DEPLOYING: eim.PhaseDeploying,
	workloadsv1.WorkloadStatus_PHASE_RUNNING:   eim.PhaseRunning,
	workloadsv1.WorkloadStatus_PHASE_DEGRADED:  eim.PhaseDegraded,
	workloadsv1.WorkloadStatus_PHASE_EXITED:    eim.PhaseExited,
	workloadsv1.WorkloadStatus_PHASE_ERROR:     eim.PhaseError,
	workloadsv1.WorkloadStatus_PHASE_STOPPED:   eim.PhaseStopped,
	workloadsv1.WorkloadStatus_PHASE_REMOVING:  eim.PhaseRemoving,
}

func invalid(format string, args ...any) error {
	return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf(format, args...))
}

func checkText(field, v string) error {
	if len(v) > maxText || !utf8.ValidString(v) {
		return invalid("%s: at most %d bytes of UTF-8", field, maxText)
	}
	return nil
}

func unixTime(sec int64) eim.Time {
	if sec <= 0 {
		return eim.Time{}
	}
	return eim.TimeFromUnixMilli(sec * 1000)
}

// ReportStatus implements workloadsv1connect.WorkloadServiceHandler.
func (s *Service) ReportStatus(ctx context.Context, req *connect.Request[workloadsv1.ReportStatusRequest]) (*connect.Response[workloadsv1.ReportStatusResponse], error) {
	n, err := southbound.Caller(ctx)
	if err != nil {
		return nil, err
	}
	m := req.Msg
	if len(m.Workloads) > maxReported {
		return nil, invalid("workloads: at most %d", maxReported)
	}
	sts := make([]eim.EdgeWorkloadStatus, 0, len(m.Workloads))
	for i, w := range m.Workloads {
		f := fmt.Sprintf("workloads[%d]", i)
		if eim.CheckEdgeWorkloadName(w.Name) != nil {
			return nil, invalid("%s.name: %q is not a workload name", f, w.Name)
		}
		ph, ok := phases[w.Phase]
		if !ok {
			return nil, invalid("%s.phase: %v is not a phase", f, w.Phase)
		}
		if err := checkText(f+".last_error", w.LastError); err != nil {
			return nil, err
		}
		if len(w.Containers) > eim.MaxEdgeWorkloadContainers*2 {
			return nil, invalid("%s.containers: at most %d", f, eim.MaxEdgeWorkloadContainers*2)
		}
		st := eim.EdgeWorkloadStatus{Workload: w.Name, HostID: n.HostID, Revision: w.Revision, Phase: ph, LastError: w.LastError, TransitionTime: unixTime(w.TransitionTime)}
		for j, c := range w.Containers {
			if err := checkText(fmt.Sprintf("%s.containers[%d].error", f, j), c.Error); err != nil {
				return nil, err
			}
			if len(c.Name) > 253 || len(c.State) > 64 || !utf8.ValidString(c.Name+c.State) {
				return nil, invalid("%s.containers[%d]: name or state too long", f, j)
			}
			st.Containers = append(st.Containers, eim.ContainerState{Name: c.Name, State: c.State, ExitCode: c.ExitCode, Restarts: c.Restarts,
				Error: c.Error, Started: unixTime(c.StartedTime), Finished: unixTime(c.FinishedTime)})
		}
		sts = append(sts, st)
	}
	var version int64
	if m.Version != "" {
		if version, err = strconv.ParseInt(m.Version, 10, 64); err != nil || version < 0 {
			return nil, invalid("version: %q is not a version", m.Version)
		}
	}
	if err := s.o.Store.RecordEdgeWorkloadStatus(ctx, n.Project, n.HostID, version, sts); err != nil {
		return nil, southbound.Error(ctx, s.log, "workloads: status", err)
	}
	return connect.NewResponse(&workloadsv1.ReportStatusResponse{}), nil
}

// ReportLogs implements workloadsv1connect.WorkloadServiceHandler.
func (s *Service) ReportLogs(ctx context.Context, req *connect.Request[workloadsv1.ReportLogsRequest]) (*connect.Response[workloadsv1.ReportLogsResponse], error) {
	n, err := southbound.Caller(ctx)
	if err != nil {
		return nil, err
	}
	m := req.Msg
	if m.Id == "" || len(m.Id) > 64 {
		return nil, invalid("id: required, at most 64 bytes")
	}
	if err := checkText("error", m.Error); err != nil {
		return nil, err
	}
	if len(m.Logs) > eim.MaxEdgeWorkloadContainers*2 {
		return nil, invalid("logs: at most %d", eim.MaxEdgeWorkloadContainers*2)
	}
	var logs []eim.ContainerLog
	for i, l := range m.Logs {
		if len(l.Text) > maxLogBytes {
			return nil, invalid("logs[%d].text: at most %d bytes", i, maxLogBytes)
		}
		logs = append(logs, eim.ContainerLog{Container: l.Container, Text: strings.ToValidUTF8(string(l.Text), "\uFFFD")})
	}
	if err := s.o.Store.AnswerEdgeWorkloadLogRequest(ctx, n.Project, n.HostID, m.Id, logs, m.Error); err != nil {
		return nil, southbound.Error(ctx, s.log, "workloads: logs", err)
	}
	return connect.NewResponse(&workloadsv1.ReportLogsResponse{}), nil
}

// egressTarget checks that the device runs the workload and that target
// is one of its revision's egress data paths.
func (s *Service) egressTarget(ctx context.Context, n southbound.Node, workload, target string) error {
	return s.dataTarget(ctx, n, workload, target, false)
}

// dataTarget checks that the device runs the workload and that target is
// one of its revision's egress (or, with ingress, ingress) data paths.
func (s *Service) dataTarget(ctx context.Context, n southbound.Node, workload, target string, ingress bool) error {
	if eim.CheckEdgeWorkloadName(workload) != nil {
		return invalid("workload: %q is not a workload name", workload)
	}
	dir := "egress"
	if ingress {
		dir = "ingress"
	}
	dw, err := s.o.Store.DeviceWorkloads(ctx, n.Project, n.HostID)
	if err != nil {
		return southbound.Error(ctx, s.log, "workloads: data paths", err)
	}
	for _, t := range dw.Targets {
		if t.Name != workload {
			continue
		}
		if d := t.Spec.Data; d != nil {
			list := d.Egress
			if ingress {
				list = d.Ingress
			}
			for _, p := range list {
				if path.Clean(p.Target) == target {
					return nil
				}
			}
		}
		return invalid("target: %q is not an %s data path of workload %s", target, dir, workload)
	}
	return connect.NewError(connect.CodeNotFound, fmt.Errorf("this device does not run workload %s", workload))
}

// checkFile checks a file's path relative to its data path.
func checkFile(field, p string) error {
	clean := path.Clean(p)
	if p == "" || len(p) > maxFilePath || !utf8.ValidString(p) || strings.HasPrefix(p, "/") || clean != p || clean == ".." || strings.HasPrefix(clean, "../") {
		return invalid("%s: %q: want a clean relative path below the data path", field, p)
	}
	return nil
}

// GrantUploads implements workloadsv1connect.WorkloadServiceHandler.
func (s *Service) GrantUploads(ctx context.Context, req *connect.Request[workloadsv1.GrantUploadsRequest]) (*connect.Response[workloadsv1.GrantUploadsResponse], error) {
	n, err := southbound.Caller(ctx)
	if err != nil {
		return nil, err
	}
	m := req.Msg
	if len(m.Changes) == 0 || len(m.Changes) > maxChanges {
		return nil, invalid("changes: 1 to %d", maxChanges)
	}
	changes := make([]eim.FileChange, 0, len(m.Changes))
	for i, c := range m.Changes {
		if err := checkFile(fmt.Sprintf("changes[%d].path", i), c.Path); err != nil {
			return nil, err
		}
		if c.Size < 0 {
			return nil, invalid("changes[%d].size: negative", i)
		}
		changes = append(changes, eim.FileChange{Path: c.Path, Present: c.Present, Size: c.Size, SHA256: c.Sha256})
	}
	if err := s.egressTarget(ctx, n, m.Workload, m.Target); err != nil {
		return nil, err
	}
	if s.o.Uploads == nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("no object storage configured for project %s", n.Project))
	}
	prefix := n.HostID + "/" + m.Workload + "/" + m.Target + "/"
	grants, expires, err := s.o.Uploads.GrantUploads(ctx, n.Project, prefix, changes)
	if err != nil {
		return nil, southbound.Error(ctx, s.log, "workloads: grant uploads", err)
	}
	out := &workloadsv1.GrantUploadsResponse{ExpiresTime: expires.Unix()}
	for _, g := range grants {
		pg := &workloadsv1.Grant{Path: g.Path, Method: g.Method, Url: g.URL, Refused: g.Refused}
		for k, v := range g.Headers {
			pg.Headers = append(pg.Headers, &workloadsv1.Header{Name: k, Value: v})
		}
		out.Grants = append(out.Grants, pg)
	}
	return connect.NewResponse(out), nil
}

// reportErrors checks the files a device reports sent (done counts them)
// or failed for a data path's target, and returns the failures as the
// status keeps them (the first maxErrorsKep).
func reportErrors(target string, done int, failed []*workloadsv1.UploadFailure) ([]string, error) {
	if done > maxChanges {
		return nil, invalid("done: at most %d", maxChanges)
	}
	if len(failed) > maxFailures {
		return nil, invalid("failed: at most %d", maxFailures)
	}
	var errs []string
	for i, f := range failed {
		if err := checkFile(fmt.Sprintf("failed[%d].path", i), f.Path); err != nil {
			return nil, err
		}
		if err := checkText(fmt.Sprintf("failed[%d].reason", i), f.Reason); err != nil {
			return nil, err
		}
		if len(errs) < maxErrorsKep {
			errs = append(errs, target+"/"+f.Path+": "+f.Reason)
		}
	}
	return errs, nil
}

// ReportUploads implements workloadsv1connect.WorkloadServiceHandler.
func (s *Service) ReportUploads(ctx context.Context, req *connect.Request[workloadsv1.ReportUploadsRequest]) (*connect.Response[workloadsv1.ReportUploadsResponse], error) {
	n, err := southbound.Caller(ctx)
	if err != nil {
		return nil, err
	}
	m := req.Msg
	errs, err := reportErrors(m.Target, len(m.Done), m.Failed)
	if err != nil {
		return nil, err
	}
	if err := s.egressTarget(ctx, n, m.Workload, m.Target); err != nil {
		return nil, err
	}
	var at time.Time // none sent: the last upload's time stays
	if len(m.Done) > 0 {
		at = s.o.Now()
	}
	if err := s.o.Store.RecordEdgeWorkloadUploads(ctx, n.Project, n.HostID, m.Workload, at, errs); err != nil {
		return nil, southbound.Error(ctx, s.log, "workloads: uploads", err)
	}
	return connect.NewResponse(&workloadsv1.ReportUploadsResponse{}), nil
}

// ListDownloads implements workloadsv1connect.WorkloadServiceHandler: the
// files of the device's own prefix of an ingress data path, then the
// workload's shared prefix's (eim.SharedIngressPrefix) that the device's
// do not hide, each with a GET grant.
func (s *Service) ListDownloads(ctx context.Context, req *connect.Request[workloadsv1.ListDownloadsRequest]) (*connect.Response[workloadsv1.ListDownloadsResponse], error) {
	n, err := southbound.Caller(ctx)
	if err != nil {
		return nil, err
	}
	m := req.Msg
	if err := s.dataTarget(ctx, n, m.Workload, m.Target, true); err != nil {
		return nil, err
	}
	if s.o.Downloads == nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("no object storage configured for project %s", n.Project))
	}
	own := n.HostID + "/" + m.Workload + "/" + m.Target + "/"
	grants, truncated, expires, err := s.o.Downloads.GrantDownloads(ctx, n.Project, []string{own, eim.SharedIngressPrefix(m.Workload, m.Target)})
	if err != nil {
		return nil, southbound.Error(ctx, s.log, "workloads: list downloads", err)
	}
	out := &workloadsv1.ListDownloadsResponse{ExpiresTime: expires.Unix(), Truncated: truncated}
	for _, g := range grants {
		f := &workloadsv1.RemoteFile{Path: g.Path, Size: g.Size, Etag: g.ETag, Url: g.URL}
		if !g.Modified.IsZero() {
			f.ModifiedTime = g.Modified.Unix()
		}
		for k, v := range g.Headers {
			f.Headers = append(f.Headers, &workloadsv1.Header{Name: k, Value: v})
		}
		out.Files = append(out.Files, f)
	}
	return connect.NewResponse(out), nil
}

// ReportDownloads implements workloadsv1connect.WorkloadServiceHandler.
func (s *Service) ReportDownloads(ctx context.Context, req *connect.Request[workloadsv1.ReportDownloadsRequest]) (*connect.Response[workloadsv1.ReportDownloadsResponse], error) {
	n, err := southbound.Caller(ctx)
	if err != nil {
		return nil, err
	}
	m := req.Msg
	errs, err := reportErrors(m.Target, len(m.Done), m.Failed)
	if err != nil {
		return nil, err
	}
	if err := s.dataTarget(ctx, n, m.Workload, m.Target, true); err != nil {
		return nil, err
	}
	var at time.Time
	if len(m.Done) > 0 {
		at = s.o.Now()
	}
	if err := s.o.Store.RecordEdgeWorkloadDownloads(ctx, n.Project, n.HostID, m.Workload, at, errs); err != nil {
		return nil, southbound.Error(ctx, s.log, "workloads: downloads", err)
	}
	return connect.NewResponse(&workloadsv1.ReportDownloadsResponse{}), nil
}
