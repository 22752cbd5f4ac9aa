package httpapi

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/eimhq/eim"
)

// discardWriter is a ResponseWriter that keeps nothing.
type discardWriter struct {
	h http.Header
	n int
}

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(b []byte) (int, error) { d.n = len(b); return len(b), nil }
func (d *discardWriter) WriteHeader(int)             {}

// hostPage builds a page of n expanded hosts as the inventory returns them:
// half in a site under a child region, with an instance and its OS; the
// other half without site or instance.
func hostPage(n int) []eim.Resource {
	now := eim.Time{Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	ts := eim.Timestamps{CreatedAt: now, UpdatedAt: now}
	md := eim.Metadata{{Key: "zone", Value: "a"}}
	items := make([]eim.Resource, n)
	for i := range items {
		h := &eim.Host{
			Meta: eim.Meta{ResourceID: fmt.Sprintf("host-%08x", i), Timestamps: ts},
			Name: fmt.Sprintf("host-%d", i), UUID: "bfd3b398-9a4b-4b4e-8f5d-0d5b8e2f1c3a",
			DesiredState: "HOST_STATE_ONBOARDED", CurrentState: "HOST_STATE_ONBOARDED",
			HostStatus: "Running", HostStatusIndicator: "STATUS_INDICATION_IDLE",
			CPUModel: "Intel(R) Xeon(R)", CPUCores: 16, MemoryBytes: 64 << 30,
			Metadata: md, InheritedMetadata: eim.Metadata{},
		}
		if i%2 == 0 {
			h.SiteID = "site-00000001"
			h.Site = &eim.Site{
				Meta: eim.Meta{ResourceID: h.SiteID, Timestamps: ts}, AliasID: h.SiteID, Name: "store-1",
				RegionID: "region-00000002", Metadata: md, InheritedMetadata: eim.Metadata{},
				Region: &eim.Region{
					Meta: eim.Meta{ResourceID: "region-00000002", Timestamps: ts}, AliasID: "region-00000002",
					Name: "west", ParentID: "region-00000001", Metadata: md, InheritedMetadata: eim.Metadata{},
				},
			}
			h.Instance = &eim.Instance{
				Meta: eim.Meta{ResourceID: fmt.Sprintf("inst-%08x", i), Timestamps: ts}, AliasID: fmt.Sprintf("inst-%08x", i),
				Name: "inst", Kind: "INSTANCE_KIND_METAL", HostID: h.ResourceID, OSID: "os-00000001",
				OS: &eim.OS{Meta: eim.Meta{ResourceID: "os-00000001", Timestamps: ts}, Name: "ubuntu"},
			}
		}
		items[i] = h
	}
	return items
}

// BenchmarkEncodeHostList measures encoding one page of 100 hosts into the
// list envelope, the wire work of GET …/compute/hosts?pageSize=100.
func BenchmarkEncodeHostList(b *testing.B) {
	h := &handler{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		items := hostPage(100) // fresh copies: encoding fills references in
		b.StartTimer()
		h.writeList(w, "hosts", items, 1000, true)
	}
	b.ReportMetric(float64(w.n), "bytes/page")
}
