package objstore_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/objstore"
)

// BenchmarkGrantUploads: one device's call for 100 changed files, each
// granted a presigned PUT bound to its checksum (the setting read from
// SQLite, its secret opened, 100 signatures).
func BenchmarkGrantUploads(b *testing.B) {
	e := newEnv(b, objstore.Options{GrantBurst: 1 << 30, GrantRate: 1 << 30})
	e.want("writer", http.MethodPut, "/v1/projects/a/objectstorage", map[string]any{"endpoint": "http://127.0.0.1:1", "bucket": "edge",
		"pathStyle": true, "accessKeyId": "AK", "secretAccessKey": "sk"}, http.StatusOK)
	changes := make([]eim.FileChange, 100)
	for i := range changes {
		changes[i] = change(fmt.Sprintf("day/%03d.raw", i), []byte(fmt.Sprint(i)))
	}
	b.ResetTimer()
	for b.Loop() {
		gs, _, err := e.svc.GrantUploads(b.Context(), "a", e.hostA+"/cam/out/", changes)
		if err != nil || gs[99].URL == "" {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/100, "µs/grant")
}
