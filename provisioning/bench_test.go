package provisioning_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
	provisioningv1 "github.com/eimhq/eim/proto/eim/provisioning/v1"
	"github.com/eimhq/eim/provisioning"
	"github.com/eimhq/eim/sqlstore"
)

// BenchmarkReportActions: nodes walking their workflows, from 64
// concurrent callers through the batcher as the server sets it up. Each
// call is one report (RUNNING, then SUCCEEDED, of each action in turn,
// with a line of output): every one writes the workflow, most the
// instance's provisioning status, the last of a workflow the host's
// status. A node's reports are made one after the other, as a node makes
// them.
func BenchmarkReportActions(b *testing.B) {
	engines := map[string]string{"sqlite": ""}
	if pgURL != "" {
		engines["postgres"] = pgURL
	}
	for name, base := range engines {
		b.Run(name, func(b *testing.B) {
			dsn := base
			if dsn == "" {
				dsn = filepath.Join(b.TempDir(), "eim.db")
			}
			ctx := context.Background()
			st, err := sqlstore.Open(ctx, dsn, sqlstore.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			workers := 1
			if name == "postgres" {
				workers = 2
			}
			bt := inventory.NewBatcher(st, inventory.BatcherOptions{MaxBatch: 128, Workers: workers})
			defer bt.Close()
			inv := inventory.New(st, inventory.Options{})
			proj := fmt.Sprintf("bench%d", time.Now().UnixNano())
			if _, err := inv.CreateProject(ctx, proj, ""); err != nil {
				b.Fatal(err)
			}
			svc := provisioning.New(provisioning.Options{Store: st, Batcher: bt, AgentURL: "https://eim.example:8443",
				CACertPEM: []byte(testCA), CAFingerprint: "ab12"})
			o, err := inv.Create(ctx, proj, &eim.OS{Name: "ubuntu", ImageURL: "https://example.com/os.img", Sha256: goodSha,
				ProfileName: "ubuntu", Architecture: "x86_64", SecurityFeature: "SECURITY_FEATURE_NONE"})
			if err != nil {
				b.Fatal(err)
			}
			// Every node makes 2 reports per action; the callers each take
			// nodes until they have made their share.
			const parallelism = 32 // × 2 cores = 64 callers
			perNode := 2 * 7
			nodes := make([]benchNode, b.N/perNode+2*parallelism*2+1)
			for i := range nodes {
				h, err := inv.Create(ctx, proj, &eim.Host{Name: fmt.Sprint("edge", i), UUID: fmt.Sprintf("4c4c4544-0000-4000-8000-%012d", i)})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := inv.Create(ctx, proj, &eim.Instance{Name: "inst", Kind: eim.InstanceKindMetal, HostID: h.Base().ResourceID, OSID: o.Base().ResourceID}); err != nil {
					b.Fatal(err)
				}
				nctx := asNode(ctx, proj, h.Base().ResourceID)
				resp, err := svc.GetWorkflow(nctx, connect.NewRequest(&provisioningv1.GetWorkflowRequest{AgentVersion: "bench"}))
				if err != nil {
					b.Fatal(err)
				}
				nodes[i] = benchNode{ctx: nctx, wf: resp.Msg.Workflow}
			}
			var taken atomic.Int64
			b.SetParallelism(parallelism)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				var n *benchNode
				step := 0
				for pb.Next() {
					if n == nil || step == 2*len(n.wf.Actions) {
						n, step = &nodes[taken.Add(1)-1], 0
					}
					state := provisioningv1.ActionState_ACTION_STATE_RUNNING
					if step%2 == 1 {
						state = provisioningv1.ActionState_ACTION_STATE_SUCCEEDED
					}
					m := &provisioningv1.ReportActionRequest{WorkflowId: n.wf.Id, Attempt: n.wf.Attempt, Index: uint32(step / 2), State: state,
						Output: []byte(fmt.Sprintf("step %d done\n", step))}
					resp, err := svc.ReportActions(n.ctx, connect.NewRequest(&provisioningv1.ReportActionsRequest{Reports: []*provisioningv1.ReportActionRequest{m}}))
					if err != nil || resp.Msg.Cancel {
						b.Errorf("report %d: %v (cancel %v)", step, err, err == nil && resp.Msg.Cancel)
						return
					}
					step++
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(st.Races())/float64(b.N), "races/op")
		})
	}
}

type benchNode struct {
	ctx context.Context
	wf  *provisioningv1.Workflow
}
