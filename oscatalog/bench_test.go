package oscatalog_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/eimhq/eim/oscatalog"
)

// BenchmarkPass measures the refresh pass over 1,000 projects, each with
// two instances on the older version of an immutable OS. The first pass
// (every project gets the catalog, every instance its osUpdateAvailable)
// is reported as first-pass-ms; each iteration is then a pass with nothing
// to do (what the 12-hourly refresh costs when the manifests did not
// change). Results in BENCHMARKS.md.
func BenchmarkPass(b *testing.B) {
	const projects, perProject = 1000, 2
	for _, engine := range engines() {
		b.Run(engine, func(b *testing.B) {
			e := newEnv(b, engine)
			cat := testCatalog(b, "")
			old := cat.Lookup(oscatalog.Key{ProfileName: "emt", Version: "3.0.1"})
			for i := range projects {
				p := e.project(fmt.Sprintf("p%04d", i))
				// The old version only, as a user would have had it:
				// the pass adds the newer one.
				o := old.OS()
				o.ProfileVersion = ""
				o.Name = "old emt"
				o = e.userOS(p, o)
				for range perProject {
					e.instance(p, o.ResourceID)
				}
			}
			m := oscatalog.New(oscatalog.Options{Store: e.store, Catalog: cat, Refresh: -1})
			start := time.Now()
			st := m.Pass(e.ctx)
			first := time.Since(start)
			if st.Projects != projects || st.Created != projects*2 || st.Instances != projects*perProject || st.Failed != 0 {
				b.Fatalf("first pass: got %+v", st)
			}
			b.ResetTimer()
			for b.Loop() {
				if st := m.Pass(e.ctx); st.Created+st.Updated+st.Instances+st.Failed != 0 {
					b.Fatalf("steady pass: got %+v", st)
				}
			}
			b.ReportMetric(float64(first.Milliseconds()), "first-pass-ms")
		})
	}
}
