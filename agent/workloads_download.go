package agent

import (
	"context"
	"path/filepath"
	"time"

	"connectrpc.com/connect"

	"github.com/eimhq/eim/agent/download"
	workloadsv1 "github.com/eimhq/eim/proto/eim/workloads/v1"
	"github.com/eimhq/eim/proto/eim/workloads/v1/workloadsv1connect"
)

// lister is the server's side of download passes.
type lister struct {
	wc workloadsv1connect.WorkloadServiceClient
}

func (l lister) List(ctx context.Context, workload, target string) ([]download.File, time.Time, bool, error) {
	resp, err := l.wc.ListDownloads(ctx, connect.NewRequest(&workloadsv1.ListDownloadsRequest{Workload: workload, Target: target}))
	if err != nil {
		return nil, time.Time{}, false, err
	}
	out := make([]download.File, 0, len(resp.Msg.Files))
	for _, f := range resp.Msg.Files {
		d := download.File{Path: f.Path, Size: f.Size, ETag: f.Etag, URL: f.Url}
		for _, h := range f.Headers {
			d.Headers = append(d.Headers, [2]string{h.Name, h.Value})
		}
		out = append(out, d)
	}
	var expires time.Time
	if s := resp.Msg.ExpiresTime; s > 0 {
		expires = time.Unix(s, 0)
	}
	return out, expires, resp.Msg.Truncated, nil
}

func (l lister) Report(ctx context.Context, workload, target string, done []string, failed []download.Failure) error {
	req := &workloadsv1.ReportDownloadsRequest{Workload: workload, Target: target, Done: done}
	for _, f := range failed {
		req.Failed = append(req.Failed, &workloadsv1.UploadFailure{Path: f.Path, Reason: f.Reason})
	}
	_, err := l.wc.ReportDownloads(ctx, connect.NewRequest(req))
	return err
}

// downloads is the download loop's passer; its manifests are kept in
// StateDir/downloads.
func (n *Node) downloads() passer {
	dir := ""
	if n.StateDir != "" {
		dir = filepath.Join(n.StateDir, "downloads")
	}
	syncer := &download.Syncer{Lister: lister{wc: n.wc}, Client: n.dataClient(), StateDir: dir, Now: n.Now}
	return passer{verb: "download",
		prune: func(keep []dataPath) error {
			ps := make([]download.Path, len(keep))
			for i, p := range keep {
				ps[i] = download.Path{Workload: p.Workload, Dir: p.Source, Target: p.Target}
			}
			removed, err := syncer.Prune(ps)
			if removed > 0 {
				n.log().Info("removed the downloaded files of data paths no longer wanted", "files", removed)
			}
			return err
		},
		pass: func(ctx context.Context, p dataPath) (passOutcome, error) {
			res, err := syncer.Sync(ctx, download.Path{Workload: p.Workload, Dir: p.Source, Target: p.Target, BytesPerSecond: p.BytesPerSecond})
			o := passOutcome{done: len(res.Done), failed: len(res.Failed)}
			if len(res.Failed) > 0 {
				o.first = res.Failed[0].Path + ": " + res.Failed[0].Reason
			}
			if err == nil && res.Truncated {
				n.log().Warn("ingress data path holds more files than one listing: the rest are not downloaded",
					"workload", p.Workload, "target", p.Target, "files", len(res.Done))
			}
			return o, err
		}}
}
