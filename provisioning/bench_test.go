package provisioning_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
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
// them. tx/op and stmts/op are the transactions (a batch's shared by its
// calls) and statements the store ran per call.
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
			b.ReportAllocs()
			tx0, stmt0 := st.Work()
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
			reportWork(b, st, tx0, stmt0)
			b.ReportMetric(float64(st.Races())/float64(b.N), "races/op")
		})
	}
}

// BenchmarkReportIn: installed OSes reporting in, from 64 concurrent
// callers through the batcher as the server sets it up, on hosts that are
// RUNNING already, so that nothing changes (a fleet's steady state: the
// read is the cost). Each host carries a hardware inventory and its
// workflow a log of 64 lines of output (about 10 KB), as a provisioned
// node's do.
func BenchmarkReportIn(b *testing.B) {
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
			const hosts = 512
			nodes := make([]context.Context, hosts)
			err = st.Update(ctx, proj, func(tx eim.Tx) error {
				for i := range nodes {
					h := &eim.Host{Name: fmt.Sprint("edge", i), UUID: fmt.Sprintf("4c4c4544-0000-4000-8000-%012d", i), Hostname: fmt.Sprint("edge", i),
						DesiredState: eim.HostStateOnboarded, CurrentState: eim.HostStateOnboarded, HostStatus: "Running", HostStatusIndicator: eim.StatusIdle,
						CPUModel: "Intel(R) Xeon(R) Gold 6338N", CPUCores: 32, MemoryBytes: 64 << 30, HardwareDigest: "sha256:bench",
						CPUCapabilities: strings.Repeat("sse4_2,avx2,", 40)}
					for d := range 4 {
						h.HostStorages = append(h.HostStorages, eim.HostStorage{DeviceName: fmt.Sprintf("nvme%dn1", d), Serial: fmt.Sprintf("S%06d%d", i, d),
							Vendor: "Samsung", Model: "PM9A3", CapacityBytes: 960 << 30})
					}
					if err := tx.Create(ctx, h); err != nil {
						return err
					}
					in := &eim.Instance{Name: "inst", Kind: eim.InstanceKindMetal, HostID: h.ResourceID, DesiredState: eim.InstanceStateRunning,
						CurrentState: eim.InstanceStateRunning, InstanceStatus: "Running", InstanceStatusIndicator: eim.StatusIdle}
					if err := tx.Create(ctx, in); err != nil {
						return err
					}
					wf := &eim.Workflow{InstanceID: in.ResourceID, HostID: h.ResourceID, Attempt: 1, State: eim.WorkflowSucceeded,
						Actions: []eim.WorkflowAction{{Name: "stream-image", Type: eim.ActionStreamImage, State: eim.ActionSucceeded}}}
					wf.ResourceID = string(eim.KindWorkflow) + "-" + strings.TrimPrefix(in.ResourceID, string(eim.KindInstance)+"-")
					for k := range 64 {
						wf.Log = append(wf.Log, eim.WorkflowLogEntry{Seq: k + 1, Attempt: 1, Name: "stream-image",
							Output: fmt.Sprintf("%s written %d MiB of 4096 (%d%%)\n", strings.Repeat("=", 120), k*64, k*100/64)})
					}
					if err := tx.Create(ctx, wf); err != nil {
						return err
					}
					nodes[i] = asNode(ctx, proj, h.ResourceID)
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			var next atomic.Int64
			b.SetParallelism(32) // × 2 cores = 64 callers
			b.ReportAllocs()
			tx0, stmt0 := st.Work()
			rev0, _ := st.Revision(ctx)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := int(next.Add(1)) % hosts
					if _, err := svc.ReportIn(nodes[i], connect.NewRequest(&hostv1.ReportInRequest{Hostname: fmt.Sprint("edge", i)})); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			reportWork(b, st, tx0, stmt0)
			if rev, _ := st.Revision(ctx); rev != rev0 {
				b.Errorf("report-ins of running nodes wrote: revision %d, was %d", rev, rev0)
			}
		})
	}
}

// reportWork reports the store's transactions and statements per op
// since tx0 and stmt0 (sqlstore.Store.Work).
func reportWork(b *testing.B, st *sqlstore.Store, tx0, stmt0 int64) {
	tx, stmt := st.Work()
	b.ReportMetric(float64(tx-tx0)/float64(b.N), "tx/op")
	b.ReportMetric(float64(stmt-stmt0)/float64(b.N), "stmts/op")
}

type benchNode struct {
	ctx context.Context
	wf  *provisioningv1.Workflow
}
