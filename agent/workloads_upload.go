package agent

import (
	"context"
	"net/http"
	"path/filepath"
	"slices"
	"time"

	"connectrpc.com/connect"

	"github.com/eimhq/eim/agent/download"
	"github.com/eimhq/eim/agent/upload"
	workloadsv1 "github.com/eimhq/eim/proto/eim/workloads/v1"
	"github.com/eimhq/eim/proto/eim/workloads/v1/workloadsv1connect"
)

// The data loops: the upload loop sends the files of the workloads'
// egress data paths (package upload), the download loop brings those of
// their ingress data paths (package download). Each makes a pass over
// each of its paths every interval the path sets (default 15 s, as
// Flotta's), one pass at a time: the device's link is one each way. A
// pass that fails is tried again with back-off.

// defaultUploadInterval is a data path's interval when it sets none.
const defaultUploadInterval = 15 * time.Second

// DefaultUploadRetry bounds the waits before a failed pass is tried
// again.
var DefaultUploadRetry = Backoff{Min: 5 * time.Second, Max: 5 * time.Minute}

// dataPath is a data path of the set.
type dataPath struct {
	Workload       string
	Source         string // the directory on the device
	Target         string
	BytesPerSecond int64
	every          time.Duration
	ingress        bool
}

func dataPaths(set []*workloadsv1.Workload) []dataPath {
	var out []dataPath
	for _, w := range set {
		for _, d := range w.DataPaths {
			ingress := d.Direction == workloadsv1.DataPath_DIRECTION_INGRESS
			if (!ingress && d.Direction != workloadsv1.DataPath_DIRECTION_EGRESS) || !filepath.IsAbs(d.Source) || d.Target == "" {
				continue
			}
			every := time.Duration(d.IntervalSeconds) * time.Second
			if every <= 0 {
				every = defaultUploadInterval
			}
			out = append(out, dataPath{Workload: w.Name, Source: d.Source, Target: d.Target,
				BytesPerSecond: int64(min(d.BandwidthBytesPerSecond, 1<<62)), every: every, ingress: ingress})
		}
	}
	return out
}

// grants is the server's side of upload passes.
type grants struct {
	wc workloadsv1connect.WorkloadServiceClient
}

func (g grants) Grant(ctx context.Context, workload, target string, changes []upload.Change) ([]upload.Grant, time.Time, error) {
	req := &workloadsv1.GrantUploadsRequest{Workload: workload, Target: target}
	for _, c := range changes {
		req.Changes = append(req.Changes, &workloadsv1.FileChange{Path: c.Path, Present: c.Present, Size: c.Size, Sha256: c.SHA256})
	}
	resp, err := g.wc.GrantUploads(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, time.Time{}, err
	}
	var out []upload.Grant
	for _, gr := range resp.Msg.Grants {
		u := upload.Grant{Path: gr.Path, Method: gr.Method, URL: gr.Url, Refused: gr.Refused}
		for _, h := range gr.Headers {
			u.Headers = append(u.Headers, [2]string{h.Name, h.Value})
		}
		out = append(out, u)
	}
	var expires time.Time
	if s := resp.Msg.ExpiresTime; s > 0 {
		expires = time.Unix(s, 0)
	}
	return out, expires, nil
}

func (g grants) Report(ctx context.Context, workload, target string, done []string, failed []upload.Failure) error {
	req := &workloadsv1.ReportUploadsRequest{Workload: workload, Target: target, Done: done}
	for _, f := range failed {
		req.Failed = append(req.Failed, &workloadsv1.UploadFailure{Path: f.Path, Reason: f.Reason})
	}
	_, err := g.wc.ReportUploads(ctx, connect.NewRequest(req))
	return err
}

// uploadDir is where the upload passes keep what they sent.
func (n *Node) uploadDir() string {
	if n.StateDir == "" {
		return ""
	}
	return filepath.Join(n.StateDir, "uploads")
}

// passOutcome is what the loop logs of a pass.
type passOutcome struct {
	done, failed int
	first        string // the first failure: "path: reason"
}

// passer makes the passes of one direction.
type passer struct {
	verb   string // "upload", "download"
	pass   func(ctx context.Context, p dataPath) (passOutcome, error)
	forget func(workload string) error // nil: prune does it
	// prune, when set, is given the data paths of the set each time they
	// change (and at the start, once the set is known): it removes what
	// the passes left for the others.
	prune func(keep []dataPath) error
}

// uploads is the upload loop's passer.
func (n *Node) uploads() passer {
	syncer := &upload.Syncer{Granter: grants{wc: n.wc}, Client: n.dataClient(), StateDir: n.uploadDir(), Now: n.Now}
	return passer{verb: "upload", forget: syncer.Forget,
		pass: func(ctx context.Context, p dataPath) (passOutcome, error) {
			res, err := syncer.Sync(ctx, upload.Path{Workload: p.Workload, Source: p.Source, Target: p.Target, BytesPerSecond: p.BytesPerSecond})
			o := passOutcome{done: len(res.Sent), failed: len(res.Failed)}
			if len(res.Failed) > 0 {
				o.first = res.Failed[0].Path + ": " + res.Failed[0].Reason
			}
			return o, err
		}}
}

// dataClient sends the grants' requests.
func (n *Node) dataClient() *http.Client {
	if n.UploadClient != nil {
		return n.UploadClient
	}
	return n.urlClient()
}

// runData is a data loop: the passes of the data paths of one direction
// (ingress or not).
func (n *Node) runData(ctx context.Context, ingress bool, wake <-chan struct{}, ps passer) {
	e := n.edge
	type due struct {
		at    time.Time
		retry retrier
	}
	next := map[dataPath]*due{}
	var pruned []dataPath // the paths the last successful prune kept
	prunedOnce := false
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-wake:
		}
		e.mu.Lock()
		paths, known := e.paths, e.pathsKnown
		e.mu.Unlock()
		if ps.prune != nil && known {
			var keep []dataPath
			for _, p := range paths {
				if p.ingress == ingress {
					keep = append(keep, p)
				}
			}
			if !prunedOnce || !slices.Equal(keep, pruned) {
				if err := ps.prune(keep); err != nil {
					n.log().Warn("cannot remove the "+ps.verb+"s of data paths no longer wanted; tried again at the next change", "err", err)
				}
				pruned, prunedOnce = keep, true
			}
		}
		now := n.now()
		wait := time.Minute
		seen := map[dataPath]bool{}
		workloads := map[string]bool{}
		for _, p := range paths {
			if p.ingress != ingress {
				continue
			}
			seen[p] = true
			workloads[p.Workload] = true
			d := next[p]
			if d == nil {
				d = &due{retry: retrier{b: n.uploadRetry()}}
				next[p] = d
			}
			if now.Before(d.at) {
				wait = min(wait, d.at.Sub(now))
				continue
			}
			res, err := ps.pass(ctx, p)
			if ctx.Err() != nil {
				return
			}
			now = n.now()
			switch {
			case err != nil:
				r := d.retry.next(err)
				d.at = now.Add(r)
				n.log().Warn("data "+ps.verb+" failed", "workload", p.Workload, "target", p.Target, "err", err, "retry_in", r)
			case res.failed > 0:
				r := min(d.retry.next(nil), p.every)
				d.at = now.Add(r)
				n.log().Warn("data "+ps.verb+" incomplete", "workload", p.Workload, "target", p.Target,
					"done", res.done, "failed", res.failed, "first", res.first, "retry_in", r)
			default:
				d.retry.reset()
				d.at = now.Add(p.every)
				if res.done > 0 {
					n.log().Info("data "+ps.verb+"ed", "workload", p.Workload, "target", p.Target, "files", res.done)
				}
			}
			wait = min(wait, d.at.Sub(now))
		}
		for p := range next {
			if seen[p] {
				continue
			}
			delete(next, p)
			// Its workload was removed, or the data path: a workload
			// of that name deployed again starts afresh.
			if !workloads[p.Workload] && ps.forget != nil {
				if err := ps.forget(p.Workload); err != nil {
					n.log().Warn("cannot drop a data path's "+ps.verb+" state", "workload", p.Workload, "err", err)
				}
			}
		}
		t.Reset(max(wait, 10*time.Millisecond))
	}
}

func (n *Node) uploadRetry() Backoff {
	if n.UploadRetry.Min > 0 {
		return n.UploadRetry
	}
	return DefaultUploadRetry
}

var (
	_ upload.Granter  = grants{}
	_ download.Lister = lister{}
)
