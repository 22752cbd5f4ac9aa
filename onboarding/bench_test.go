package onboarding_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/onboarding"
	onboardingv1 "github.com/eimhq/eim/proto/eim/onboarding/v1"
	"github.com/eimhq/eim/sqlstore"
)

// BenchmarkDiscover: devices of pre-registered, auto-onboarded hosts
// calling Discover, from 64 concurrent callers through the batcher as the
// server sets it up (SQLite looks first, PostgreSQL writes directly).
// Every call writes: a Discover of an onboarded host issues new
// credentials.
//
// tx/op and stmts/op are the transactions (a batch's shared by its calls)
// and statements the store ran per call: what a call costs the database,
// whatever the machine's load.
func BenchmarkDiscover(b *testing.B) {
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
			svc := onboarding.New(onboarding.Options{Store: st, Batcher: bt, TokenURL: "https://eim.test/oauth2/token",
				Resync: time.Hour})
			const hosts = 1024
			uuids := make([]string, hosts)
			for i := range uuids {
				uuids[i] = newUUID()
				if _, err := inv.RegisterHost(ctx, proj, inventory.HostRegistration{UUID: uuids[i], AutoOnboard: true}); err != nil {
					b.Fatal(err)
				}
			}
			var next atomic.Int64
			b.SetParallelism(32) // × 2 cores = 64 callers
			b.ReportAllocs()
			tx0, stmt0 := st.Work()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					u := uuids[int(next.Add(1))%hosts]
					resp, err := svc.Discover(ctx, connect.NewRequest(&onboardingv1.DiscoverRequest{Uuid: u, AgentVersion: "bench"}))
					if err != nil {
						b.Error(err)
						return
					}
					if resp.Msg.Status != onboardingv1.DiscoverResponse_STATUS_ONBOARDED {
						b.Errorf("status %v, want ONBOARDED", resp.Msg.Status)
						return
					}
				}
			})
			b.StopTimer()
			reportWork(b, st, tx0, stmt0)
			b.ReportMetric(float64(st.Races())/float64(b.N), "races/op")
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
