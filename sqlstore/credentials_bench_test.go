package sqlstore

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/eimhq/eim"
)

// BenchmarkNodeCredentials compares, on one SQLite store of 100,000 hosts
// with a realistic row width, node authentication's read through the
// covering index (what NodeCredentials runs) with the same read from the
// table (what it ran before): the ratio is the point.
func BenchmarkNodeCredentials(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(b.TempDir(), "eim.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.CreateProject(ctx, &eim.Project{Name: "bench", ID: "00000000-0000-4000-8000-000000000001"}); err != nil {
		b.Fatal(err)
	}
	const n = 100_000
	// A provisioned host carries a few kilobytes: hardware, statuses.
	nics := eim.List[eim.HostNic]{{DeviceName: "enp1s0", MacAddr: "52:54:00:00:00:01", Mtu: 1500,
		IPAddresses: eim.List[eim.IPAddress]{{ResourceID: "ipaddr-00000001", Address: "192.0.2.1/24"}}}}
	var ids []string
	for i := 0; i < n; i += 1000 {
		err := s.Update(ctx, "bench", func(tx eim.Tx) error {
			for j := i; j < i+1000; j++ {
				h := &eim.Host{Name: fmt.Sprintf("h%d", j), UUID: fmt.Sprintf("4c4c4544-0000-4000-8000-%012d", j),
					DesiredState: eim.HostStateOnboarded, NodeSecretHash: fmt.Sprintf("%064d", j), NodeCredGen: 1,
					CPUCapabilities: fmt.Sprintf("%01500d", j), HostNics: nics}
				if err := tx.Create(ctx, h); err != nil {
					return err
				}
				ids = append(ids, h.ResourceID)
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	for _, q := range []struct{ name, sql string }{{"covering-index", nodeCredentialsSQLite}, {"table", nodeCredentials}} {
		b.Run(q.name, func(b *testing.B) {
			st, err := s.rdb.PrepareContext(ctx, q.sql)
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			i := 0
			for b.Loop() {
				var c eim.NodeCredentials
				var state string
				if err := st.QueryRowContext(ctx, ids[(i*7919)%n]).Scan(&c.HostID, &c.Project, &state, &c.SecretHash, &c.Gen); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
