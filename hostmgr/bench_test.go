package hostmgr_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/hostmgr"
	"github.com/eimhq/eim/inventory"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
	"github.com/eimhq/eim/southbound"
	"github.com/eimhq/eim/sqlstore"
)

// benchHosts is how many hosts the heartbeat benchmark spreads its calls
// over: enough that concurrent calls rarely meet on one host.
const benchHosts = 1024

// BenchmarkHeartbeatWrite: heartbeats that each change their host's
// status (the node flips between healthy and unhealthy), from 64
// concurrent callers through the batcher as the server sets it up: the
// heartbeat path that writes. The hosts carry a hardware inventory, as a
// fleet's do, so that what a write costs beyond its status shows.
func BenchmarkHeartbeatWrite(b *testing.B) { benchHeartbeats(b, 0) }

// BenchmarkHeartbeatWriteWithAPIEdits is BenchmarkHeartbeatWrite while
// four API clients rename the hosts the heartbeats are about to reach (a
// PATCH of the name): different fields of the same rows. races/op counts
// the transactions the store ran again because of a conflict, patches/op
// the API's writes per heartbeat.
func BenchmarkHeartbeatWriteWithAPIEdits(b *testing.B) { benchHeartbeats(b, 4) }

func benchHeartbeats(b *testing.B, editors int) {
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
			ids := make([]string, benchHosts)
			err = st.Update(ctx, proj, func(tx eim.Tx) error {
				for i := range ids {
					h := benchHost(i)
					if err := tx.Create(ctx, h); err != nil {
						return err
					}
					ids[i] = h.ResourceID
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			svc := hostmgr.New(hostmgr.Options{Store: st, Batcher: bt,
				ReportIn: func(context.Context, *connect.Request[hostv1.ReportInRequest]) (*connect.Response[hostv1.ReportInResponse], error) {
					return connect.NewResponse(&hostv1.ReportInResponse{}), nil
				},
				CheckInterval: time.Hour, FlushInterval: time.Hour})
			var next, patches atomic.Int64
			races0 := st.Races()
			ectx, stop := context.WithCancel(ctx)
			var editing sync.WaitGroup
			for w := range editors {
				editing.Go(func() {
					for k := 0; ectx.Err() == nil; k++ {
						i := (int(next.Load()) + w) % benchHosts
						_, err := inv.Update(ectx, proj, &eim.Host{Meta: eim.Meta{ResourceID: ids[i]}, Name: fmt.Sprintf("host%d-%d", i, k%10)}, []string{"name"})
						if err != nil && ectx.Err() == nil {
							b.Error(err)
							return
						}
						patches.Add(1)
					}
				})
			}
			b.SetParallelism(32) // 2 cores × 32 = 64 callers
			tx0, stmt0 := st.Work()
			b.ResetTimer()
			cpu0 := cpuTime()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					n := next.Add(1)
					i := int(n) % benchHosts
					m := &hostv1.HeartbeatRequest{}
					if (n/benchHosts)%2 == 0 {
						m.NodeHealth = &hostv1.Health{State: hostv1.Health_STATE_UNHEALTHY, Detail: "disk full"}
					}
					nctx := southbound.WithNode(ctx, southbound.Node{HostID: ids[i], Project: proj})
					if _, err := svc.Heartbeat(nctx, connect.NewRequest(m)); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
			tx1, stmt1 := st.Work()
			b.ReportMetric(float64(tx1-tx0)/float64(b.N), "tx/op")
			b.ReportMetric(float64(stmt1-stmt0)/float64(b.N), "stmts/op")
			stop()
			editing.Wait()
			b.ReportMetric(float64(st.Races()-races0)/float64(b.N), "races/op")
			if editors > 0 {
				b.ReportMetric(float64(patches.Load())/float64(b.N), "patches/op")
			}
		})
	}
}

// benchHost is a running host with the hardware a small server reports.
func benchHost(i int) *eim.Host {
	now := eim.NewTime(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC))
	ts := eim.Timestamps{CreatedAt: now, UpdatedAt: now}
	h := &eim.Host{
		Name: fmt.Sprint("host", i), UUID: fmt.Sprintf("4c4c4544-0000-4000-8000-%012d", i), SerialNumber: fmt.Sprintf("SN%08d", i),
		DesiredState: eim.HostStateOnboarded, CurrentState: eim.HostStateOnboarded,
		HostStatus: "Running", HostStatusIndicator: eim.StatusIdle,
		CPUModel: "Intel(R) Xeon(R) Gold 6338N", CPUCores: 32, CPUThreads: 64, CPUSockets: 1, MemoryBytes: 64 << 30,
		CPUCapabilities: "fpu,vme,de,pse,tsc,msr,pae,mce,cx8,apic,sep,mtrr,pge,mca,cmov,pat,pse36,clflush,dts,acpi,mmx,fxsr,sse,sse2,ss,ht,tm,pbe,syscall,nx,pdpe1gb,rdtscp,lm",
		BiosVendor:      "Dell Inc.", BiosVersion: "1.10.2", ProductName: "PowerEdge XR11", HardwareDigest: "sha256:bench",
		Metadata: eim.Metadata{{Key: "rack", Value: fmt.Sprint(i % 40)}},
	}
	for d := range 4 {
		h.HostStorages = append(h.HostStorages, eim.HostStorage{Timestamps: ts, DeviceName: fmt.Sprintf("nvme%dn1", d), Serial: fmt.Sprintf("S%06d%d", i, d),
			Vendor: "Samsung", Model: "PM9A3", CapacityBytes: 960 << 30, Wwid: fmt.Sprintf("eui.%016x", i*4+d)})
	}
	for n := range 4 {
		nic := eim.HostNic{Timestamps: ts, DeviceName: fmt.Sprintf("eno%d", n+1), MacAddr: fmt.Sprintf("00:1a:2b:%02x:%02x:%02x", i>>8&0xff, i&0xff, n),
			PciIdentifier: fmt.Sprintf("0000:%02x:00.%d", 0x18+n/2, n%2), Mtu: 1500}
		nic.LinkState.Type = eim.LinkStateUp
		nic.IPAddresses = eim.List[eim.IPAddress]{{Timestamps: ts, ResourceID: eim.NewID(eim.KindIPAddress),
			Address: fmt.Sprintf("10.%d.%d.%d/16", n, i>>8&0xff, i&0xff), Status: eim.IPAddressStatusConfigured, ConfigMethod: eim.IPConfigDynamic}}
		h.HostNics = append(h.HostNics, nic)
	}
	return h
}
