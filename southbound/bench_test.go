package southbound_test

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
	"github.com/eimhq/eim/auth"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
	"github.com/eimhq/eim/southbound"
	"github.com/eimhq/eim/sqlstore"
)

// BenchmarkAuthenticate is what node authentication costs a call of a
// known node while the feed is followed: its token found verified, its
// host's credentials in memory. It reports the credential reads that
// reach the store per call (none, once warm).
func BenchmarkAuthenticate(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	st, err := sqlstore.Open(ctx, filepath.Join(dir, "eim.db"), sqlstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	iss, err := auth.LoadIssuer(dir)
	if err != nil {
		b.Fatal(err)
	}
	const project = "bench"
	if err := st.CreateProject(ctx, &eim.Project{Name: project, ID: newUUID()}); err != nil {
		b.Fatal(err)
	}
	_, hash := southbound.NewSecret()
	var reqs []*connect.Request[hostv1.HeartbeatRequest]
	err = st.Update(ctx, project, func(tx eim.Tx) error {
		for i := range 1000 {
			h := &eim.Host{Name: fmt.Sprintf("h%d", i), DesiredState: eim.HostStateOnboarded, CurrentState: eim.HostStateOnboarded, NodeSecretHash: hash, NodeCredGen: 1}
			if err := tx.Create(ctx, h); err != nil {
				return err
			}
			tok, _, err := iss.MintNode(auth.NodeClaims{Subject: southbound.ClientID(h.ResourceID), HostID: h.ResourceID, Project: project, Gen: 1}, time.Hour)
			if err != nil {
				return err
			}
			req := connect.NewRequest(&hostv1.HeartbeatRequest{})
			req.Header().Set("Authorization", "Bearer "+tok)
			reqs = append(reqs, req)
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	cs := &countingStore{Store: st}
	sb := southbound.New(southbound.Options{Store: cs, Issuer: iss})
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { sb.Run(rctx) })
	defer func() { cancel(); wg.Wait() }()
	call := sb.Interceptor().WrapUnary(func(context.Context, connect.AnyRequest) (connect.AnyResponse, error) { return nil, nil })
	for round := 0; ; round++ {
		before := cs.reads.Load()
		for _, req := range reqs {
			if _, err := call(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
		if cs.reads.Load() == before {
			break
		}
		if round == 1000 {
			b.Fatal("calls still read the store after 1,000 rounds")
		}
		time.Sleep(10 * time.Millisecond)
	}
	before := cs.reads.Load()
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := call(ctx, reqs[int(next.Add(1))%len(reqs)]); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(cs.reads.Load()-before)/float64(b.N), "reads/op")
}
