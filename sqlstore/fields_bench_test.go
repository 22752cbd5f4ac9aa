package sqlstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/eimhq/eim"
)

// BenchmarkHostStatusWrite: a manager recording a host's status, one
// host per transaction from 32 goroutines, over 1,000 hosts with a
// hardware inventory. "row" reads the host and writes the whole row back
// (Tx.Update), "fields" reads it and writes the three status fields
// (Tx.UpdateFields), "fields-unread" writes them without reading.
func BenchmarkHostStatusWrite(b *testing.B) {
	for name, open := range engines() {
		b.Run(name, func(b *testing.B) {
			s := open(b, false)
			ctx := context.Background()
			if err := s.CreateProject(ctx, &eim.Project{Name: "bench", ID: "bench"}); err != nil {
				b.Fatal(err)
			}
			ids := make([]string, 1000)
			err := s.Update(ctx, "bench", func(tx eim.Tx) error {
				for i := range ids {
					h := hardwareHost(i)
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
			writes := map[string]func(tx eim.Tx, id string, n int64) error{
				"row": func(tx eim.Tx, id string, n int64) error {
					r, err := tx.Get(ctx, eim.KindHost, id)
					if err != nil {
						return err
					}
					h := r.(*eim.Host)
					h.HostStatus, h.HostStatusIndicator, h.HostStatusTimestamp = fmt.Sprint("Running ", n), eim.StatusIdle, uint64(n)
					return tx.Update(ctx, h)
				},
				"fields": func(tx eim.Tx, id string, n int64) error {
					r, err := tx.Get(ctx, eim.KindHost, id)
					if err != nil {
						return err
					}
					h := r.(*eim.Host)
					h.HostStatus, h.HostStatusIndicator, h.HostStatusTimestamp = fmt.Sprint("Running ", n), eim.StatusIdle, uint64(n)
					return tx.UpdateFields(ctx, h, "hostStatus", "hostStatusIndicator", "hostStatusTimestamp")
				},
				"fields-unread": func(tx eim.Tx, id string, n int64) error {
					h := &eim.Host{Meta: eim.Meta{ResourceID: id}, HostStatus: fmt.Sprint("Running ", n), HostStatusIndicator: eim.StatusIdle, HostStatusTimestamp: uint64(n)}
					return tx.UpdateFields(ctx, h, "hostStatus", "hostStatusIndicator", "hostStatusTimestamp")
				},
			}
			for wname, write := range writes {
				b.Run(wname, func(b *testing.B) {
					var next atomic.Int64
					b.SetParallelism(16) // 2 cores × 16 = 32 writers
					b.ResetTimer()
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							n := next.Add(1)
							id := ids[int(n)%len(ids)]
							if err := s.Update(ctx, "bench", func(tx eim.Tx) error { return write(tx, id, n) }); err != nil {
								b.Error(err)
								return
							}
						}
					})
				})
			}
		})
	}
}

// hardwareHost is benchHost with the hardware a small server reports.
func hardwareHost(i int) *eim.Host {
	h := benchHost(i)
	h.ResourceID = ""
	for d := range 4 {
		h.HostStorages = append(h.HostStorages, eim.HostStorage{DeviceName: fmt.Sprintf("nvme%dn1", d), Serial: fmt.Sprintf("S%06d%d", i, d),
			Vendor: "Samsung", Model: "PM9A3", CapacityBytes: 960 << 30, Wwid: fmt.Sprintf("eui.%016x", i*4+d)})
	}
	for n := range 4 {
		nic := eim.HostNic{DeviceName: fmt.Sprintf("eno%d", n+1), MacAddr: fmt.Sprintf("00:1a:2b:%02x:%02x:%02x", i>>8&0xff, i&0xff, n),
			PciIdentifier: fmt.Sprintf("0000:%02x:00.%d", 0x18+n/2, n%2), Mtu: 1500}
		nic.LinkState.Type = eim.LinkStateUp
		nic.IPAddresses = eim.List[eim.IPAddress]{{ResourceID: eim.NewID(eim.KindIPAddress),
			Address: fmt.Sprintf("10.%d.%d.%d/16", n, i>>8&0xff, i&0xff), Status: eim.IPAddressStatusConfigured, ConfigMethod: eim.IPConfigDynamic}}
		h.HostNics = append(h.HostNics, nic)
	}
	return h
}
