package oob_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/oob"
	"github.com/eimhq/eim/seal"
	"github.com/eimhq/eim/sqlstore"
)

// BenchmarkFollowCatchUp: what the follower's catch-up costs a process
// that starts on a store whose fleet was onboarded while no follower ran
// (a restart after a Day 0, or a seeded store): 5,000 hosts, each with an
// instance, in a project without BMCs, 10,000 events after the saved
// position. Each iteration opens a copy of that SQLite store and times
// Follow from its start until it is live (caught up).
func BenchmarkFollowCatchUp(b *testing.B) {
	const hosts = 5000
	ctx := context.Background()
	dir := b.TempDir()
	tmpl := filepath.Join(dir, "template.db")
	st, err := sqlstore.Open(ctx, tmpl, sqlstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if err := st.CreateProject(ctx, &eim.Project{Name: "a", ID: "00000000-0000-4000-8000-000000000001"}); err != nil {
		b.Fatal(err)
	}
	rev, err := st.Revision(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if err := st.SaveFeedPosition(ctx, "oob", rev); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < hosts; i += 100 {
		if err := st.Update(ctx, "a", func(tx eim.Tx) error {
			for j := i; j < i+100; j++ {
				h := &eim.Host{Name: fmt.Sprint("n", j)}
				if err := tx.Create(ctx, h); err != nil {
					return err
				}
				if err := tx.Create(ctx, &eim.Instance{Name: fmt.Sprint("os-", j), Kind: eim.InstanceKindMetal, HostID: h.ResourceID}); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	st.Close()
	raw := make([]byte, 32)
	rand.Read(raw)
	key, err := seal.New(raw)
	if err != nil {
		b.Fatal(err)
	}

	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		path := filepath.Join(dir, fmt.Sprint("run", i, ".db"))
		copyFile(b, tmpl, path)
		st, err := sqlstore.Open(ctx, path, sqlstore.Options{})
		if err != nil {
			b.Fatal(err)
		}
		reg := prometheus.NewRegistry()
		svc, err := oob.New(oob.Options{Store: st, Feed: st, Key: key, Authenticator: tokens{}, Metrics: reg,
			PollEvery: time.Hour, RelistEvery: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		b.StartTimer()
		go func() { defer close(done); svc.Follow(rctx) }()
		for !live(b, reg) {
			time.Sleep(time.Millisecond) // a poll's pace
		}
		b.StopTimer()
		cancel()
		<-done
		st.Close()
		os.Remove(path)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/(2*hosts), "µs/event")
}

// live reports whether the oob consumer's eim_feed_live is 1.
func live(b *testing.B, reg *prometheus.Registry) bool {
	mfs, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "eim_feed_live" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "consumer" && l.GetValue() == "oob" && m.GetGauge().GetValue() == 1 {
					return true
				}
			}
		}
	}
	return false
}

func copyFile(b *testing.B, from, to string) {
	in, err := os.Open(from)
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		b.Fatal(err)
	}
	if err := out.Close(); err != nil {
		b.Fatal(err)
	}
}
