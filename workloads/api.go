package workloads

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/apiv2"
)

// The API of edge workloads (docs/workloads.md). A write's answer carries
// its warnings (an image without a tag or digest, …) in "warnings" and,
// as Kubernetes does, in Warning headers (299).

// The API's wire shapes, declared in the root package (the Go client
// shares them).
type (
	View           = eim.EdgeWorkloadView
	Input          = eim.EdgeWorkloadInput
	DeviceView     = eim.EdgeWorkloadDeviceView
	Counts         = eim.EdgeWorkloadCounts
	StatusView     = eim.EdgeWorkloadStatusView
	RevisionCounts = eim.EdgeWorkloadRevisionCounts
	LogView        = eim.EdgeWorkloadLogView
)

func viewOf(w *eim.EdgeWorkload) *View {
	return &View{Name: w.Name, Revision: w.Revision, Spec: redact(w.Spec), CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt}
}

func writeWarnings(w http.ResponseWriter, ws []string) {
	for _, m := range ws {
		w.Header().Add("Warning", "299 - "+strconv.Quote(m))
	}
}

func (s *Service) policy(p *eim.Project) eim.EdgeWorkloadPolicy {
	return eim.EdgeWorkloadPolicy{AllowPrivileged: p.Settings.EdgeWorkloadsAllowPrivileged}
}

func (s *Service) create(w http.ResponseWriter, r *http.Request, c *call) error {
	var in Input
	if err := apiv2.DecodeStrict(r, &in); err != nil {
		return err
	}
	if err := eim.CheckEdgeWorkloadName(in.Name); err != nil {
		return err
	}
	warns, err := eim.CheckEdgeWorkloadSpec(&in.Spec, s.policy(c.proj))
	if err != nil {
		return err
	}
	ew := &eim.EdgeWorkload{Project: c.proj.Name, Name: in.Name, Spec: sealSpec(s.o.Key, c.proj.Name, in.Name, in.Spec)}
	if err := s.o.Store.CreateEdgeWorkload(r.Context(), ew); err != nil {
		return err
	}
	v := viewOf(ew)
	v.Warnings = warns
	writeWarnings(w, warns)
	apiv2.WriteJSON(w, http.StatusCreated, v)
	return nil
}

func (s *Service) put(w http.ResponseWriter, r *http.Request, c *call) error {
	var in Input
	if err := apiv2.DecodeStrict(r, &in); err != nil {
		return err
	}
	if in.Name != "" && in.Name != c.name {
		return eim.Errorf(eim.EINVALID, "name: %q is not the path's %q (a workload is not renamed)", in.Name, c.name)
	}
	ctx := r.Context()
	cur, err := s.o.Store.FindEdgeWorkload(ctx, c.proj.Name, c.name)
	if err != nil {
		return err
	}
	prev, err := openSpec(s.o.Key, c.proj.Name, c.name, cur.Spec)
	if err != nil {
		return err
	}
	fillFrom(&in.Spec, &prev)
	warns, err := eim.CheckEdgeWorkloadSpec(&in.Spec, s.policy(c.proj))
	if err != nil {
		return err
	}
	out := cur
	switch {
	case sameSpec(prev, in.Spec):
	case samePod(prev, in.Spec):
		// Only the rollout policy changed: no new revision (devices run
		// the same), the running rollout follows the new policy.
		if out, err = s.o.Store.SetEdgeWorkloadRolloutPolicy(ctx, c.proj.Name, c.name, cur.Revision, in.Spec.RolloutPolicy); err != nil {
			return err
		}
	default:
		if out, err = s.o.Store.ReviseEdgeWorkload(ctx, c.proj.Name, c.name, cur.Revision, sealSpec(s.o.Key, c.proj.Name, c.name, in.Spec)); err != nil {
			return err
		}
	}
	v := viewOf(out)
	v.Warnings = warns
	writeWarnings(w, warns)
	apiv2.WriteJSON(w, http.StatusOK, v)
	return nil
}

// sameSpec compares two opened specs: an unchanged spec is no new
// revision.
func sameSpec(a, b eim.EdgeWorkloadSpec) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}

// samePod compares two opened specs but for their rollout policies: what
// devices run is the same.
func samePod(a, b eim.EdgeWorkloadSpec) bool {
	a.RolloutPolicy, b.RolloutPolicy = nil, nil
	return sameSpec(a, b)
}

func (s *Service) get(w http.ResponseWriter, r *http.Request, c *call) error {
	ew, err := s.o.Store.FindEdgeWorkload(r.Context(), c.proj.Name, c.name)
	if err != nil {
		return err
	}
	apiv2.WriteJSON(w, http.StatusOK, viewOf(ew))
	return nil
}

func (s *Service) delete(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := s.o.Store.DeleteEdgeWorkload(r.Context(), c.proj.Name, c.name); err != nil {
		return err
	}
	apiv2.WriteJSON(w, http.StatusOK, struct{}{})
	return nil
}

// page reads pageSize and offset as the v1 API does (20 and 0 by
// default, pageSize 1 to 100).
func page(r *http.Request) (size, offset int, err error) {
	size, offset = 20, 0
	q := r.URL.Query()
	if v := q.Get("pageSize"); v != "" {
		if size, err = strconv.Atoi(v); err != nil || size < 1 || size > 100 {
			return 0, 0, eim.Errorf(eim.EINVALID, "pageSize must be between 1 and 100")
		}
	}
	if v := q.Get("offset"); v != "" {
		if offset, err = strconv.Atoi(v); err != nil || offset < 0 {
			return 0, 0, eim.Errorf(eim.EINVALID, "offset must be 0 or more")
		}
	}
	return size, offset, nil
}

// listFilter is the list's filter: terms name="x" (name:"x*" for a
// prefix) joined by AND; "" keeps all.
func listFilter(f string) (func(*eim.EdgeWorkload) bool, error) {
	f = strings.TrimSpace(f)
	if f == "" {
		return func(*eim.EdgeWorkload) bool { return true }, nil
	}
	var tests []func(*eim.EdgeWorkload) bool
	for _, term := range strings.Split(f, " AND ") {
		term = strings.TrimSpace(term)
		var op string
		switch {
		case strings.HasPrefix(term, "name="):
			op = "="
		case strings.HasPrefix(term, "name:"):
			op = ":"
		default:
			return nil, eim.Errorf(eim.EINVALID, "filter: %q: edge workloads are filtered by name only (name=\"x\", name:\"prefix*\", joined by AND)", term)
		}
		v, err := strconv.Unquote(strings.TrimSpace(term[len("name")+1:]))
		if err != nil {
			return nil, eim.Errorf(eim.EINVALID, "filter: %q: quote the value", term)
		}
		if op == "=" {
			tests = append(tests, func(w *eim.EdgeWorkload) bool { return w.Name == v })
		} else {
			prefix, wild := strings.CutSuffix(v, "*")
			tests = append(tests, func(w *eim.EdgeWorkload) bool {
				if wild {
					return strings.HasPrefix(w.Name, prefix)
				}
				return strings.Contains(w.Name, v)
			})
		}
	}
	return func(w *eim.EdgeWorkload) bool {
		for _, t := range tests {
			if !t(w) {
				return false
			}
		}
		return true
	}, nil
}

func (s *Service) list(w http.ResponseWriter, r *http.Request, c *call) error {
	size, offset, err := page(r)
	if err != nil {
		return err
	}
	keep, err := listFilter(r.URL.Query().Get("filter"))
	if err != nil {
		return err
	}
	if ob := strings.TrimSpace(r.URL.Query().Get("orderBy")); ob != "" && ob != "name" && ob != "name asc" {
		return eim.Errorf(eim.EINVALID, "orderBy: edge workloads are ordered by name only")
	}
	all, err := s.o.Store.ListEdgeWorkloads(r.Context(), c.proj.Name)
	if err != nil {
		return err
	}
	var kept []*eim.EdgeWorkload
	for _, ew := range all {
		if keep(ew) {
			kept = append(kept, ew)
		}
	}
	out := struct {
		EdgeWorkloads []*View `json:"edgeWorkloads"`
		TotalElements int     `json:"totalElements"`
		HasNext       bool    `json:"hasNext"`
	}{EdgeWorkloads: []*View{}, TotalElements: len(kept)}
	for i := offset; i < len(kept) && i < offset+size; i++ {
		out.EdgeWorkloads = append(out.EdgeWorkloads, viewOf(kept[i]))
	}
	out.HasNext = offset+size < len(kept)
	apiv2.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (s *Service) revisions(w http.ResponseWriter, r *http.Request, c *call) error {
	revs, err := s.o.Store.EdgeWorkloadRevisions(r.Context(), c.proj.Name, c.name)
	if err != nil {
		return err
	}
	type rev struct {
		Revision  int64                `json:"revision"`
		Spec      eim.EdgeWorkloadSpec `json:"spec"`
		CreatedAt eim.Time             `json:"createdAt"`
	}
	out := struct {
		Revisions []rev `json:"revisions"`
	}{Revisions: []rev{}}
	for _, rv := range revs {
		out.Revisions = append(out.Revisions, rev{rv.Revision, redact(rv.Spec), rv.CreatedAt})
	}
	apiv2.WriteJSON(w, http.StatusOK, out)
	return nil
}

// Summaries, as the status counts them.
const (
	sumRunning  = eim.SummaryRunning
	sumDegraded = eim.SummaryDegraded
	sumFailed   = eim.SummaryFailed
	sumUpdating = eim.SummaryUpdating
	sumUnknown  = eim.SummaryUnknown
	sumRemoving = eim.SummaryRemoving
)

func summary(target int64, st *eim.EdgeWorkloadStatus) string {
	if st == nil {
		return eim.EdgeWorkloadSummary(target, 0, "")
	}
	return eim.EdgeWorkloadSummary(target, st.Revision, st.Phase)
}

// deviceViews joins a workload's targets and statuses.
func (s *Service) deviceViews(ctx context.Context, project, name string) ([]DeviceView, error) {
	targets, err := s.o.Store.EdgeWorkloadTargets(ctx, project, "")
	if err != nil {
		return nil, err
	}
	sts, err := s.o.Store.EdgeWorkloadStatuses(ctx, project, name)
	if err != nil {
		return nil, err
	}
	byHost := map[string]*eim.EdgeWorkloadStatus{}
	for i := range sts {
		byHost[sts[i].HostID] = &sts[i]
	}
	var out []DeviceView
	seen := map[string]bool{}
	add := func(host string, target int64) {
		st := byHost[host]
		v := DeviceView{HostID: host, TargetRevision: target, Summary: summary(target, st), Containers: []eim.ContainerState{}, Phase: eim.PhaseUnknown}
		if st != nil {
			v.Revision, v.LastError, v.TransitionTime, v.ReportedAt = st.Revision, st.LastError, st.TransitionTime, st.ReportedAt
			v.LastDataUpload, v.UploadErrors = st.LastDataUpload, st.UploadErrors
			v.LastDataDownload, v.DownloadErrors = st.LastDataDownload, st.DownloadErrors
			if st.Phase != "" {
				v.Phase = st.Phase
			}
			if st.Containers != nil {
				v.Containers = st.Containers
			}
		}
		out = append(out, v)
		seen[host] = true
	}
	for _, t := range targets {
		if t.Workload == name {
			add(t.HostID, t.Revision)
		}
	}
	for _, st := range sts {
		if !seen[st.HostID] {
			add(st.HostID, 0)
		}
	}
	return out, nil
}

func (s *Service) devices(w http.ResponseWriter, r *http.Request, c *call) error {
	if _, err := s.o.Store.FindEdgeWorkload(r.Context(), c.proj.Name, c.name); err != nil {
		return err
	}
	ds, err := s.deviceViews(r.Context(), c.proj.Name, c.name)
	if err != nil {
		return err
	}
	if ds == nil {
		ds = []DeviceView{}
	}
	apiv2.WriteJSON(w, http.StatusOK, struct {
		Devices []DeviceView `json:"devices"`
	}{ds})
	return nil
}

// addN counts n devices of summary sum.
func addN(c *Counts, sum string, n int) {
	c.Total += n
	switch sum {
	case sumRunning:
		c.Running += n
	case sumDegraded:
		c.Degraded += n
	case sumFailed:
		c.Failed += n
	case sumUpdating:
		c.Updating += n
	case sumUnknown:
		c.Unknown += n
	case sumRemoving:
		c.Removing += n
	}
}

func (s *Service) status(w http.ResponseWriter, r *http.Request, c *call) error {
	ew, err := s.o.Store.FindEdgeWorkload(r.Context(), c.proj.Name, c.name)
	if err != nil {
		return err
	}
	// Counted by the store in one grouped read: a fleet's status is asked
	// often (the UI, dashboards, a rollout's checks), and reading every
	// device's row and the project's targets for it cost the server more
	// than the devices' reports (BENCHMARKS.md, edge workloads).
	counts, err := s.o.Store.EdgeWorkloadDeviceCountsOf(r.Context(), c.proj.Name, c.name)
	if err != nil {
		return err
	}
	out := aggregate(ew, counts)
	if ew.Spec.RolloutPolicy != nil {
		ro, err := s.o.Store.FindEdgeWorkloadRollout(r.Context(), c.proj.Name, c.name)
		switch {
		case err == nil:
			out.Rollout = &eim.EdgeWorkloadRolloutSummary{FromRevision: ro.FromRevision, ToRevision: ro.ToRevision, State: ro.State,
				Reason: ro.Reason, Since: ro.Since, Batch: ro.Batch + 1}
		case eim.ErrorCode(err) != eim.ENOTFOUND:
			return err
		}
	}
	apiv2.WriteJSON(w, http.StatusOK, out)
	return nil
}

// aggregate makes a workload's status from its devices' counts.
func aggregate(ew *eim.EdgeWorkload, counts []eim.EdgeWorkloadDeviceCount) *StatusView {
	out := &StatusView{Name: ew.Name, Revision: ew.Revision, ByRevision: []RevisionCounts{}}
	byRev := map[int64]*Counts{}
	var revs []int64
	for _, c := range counts {
		sum := eim.EdgeWorkloadSummary(c.Target, c.Revision, c.Phase)
		addN(&out.Devices, sum, c.Devices)
		if byRev[c.Revision] == nil {
			byRev[c.Revision] = &Counts{}
			revs = append(revs, c.Revision)
		}
		addN(byRev[c.Revision], sum, c.Devices)
	}
	slices.Sort(revs)
	for _, rv := range revs {
		out.ByRevision = append(out.ByRevision, RevisionCounts{Revision: rv, EdgeWorkloadCounts: *byRev[rv]})
	}
	return out
}

func badParam(name, format string, args ...any) error {
	return eim.Errorf(eim.EINVALID, "%s: %s", name, fmt.Sprintf(format, args...))
}
