package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/eimhq/eim/httpapi"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/sqlstore"
)

// BenchmarkCreateHost measures host creates through the handler over real
// HTTP and SQLite, 32 concurrent clients (with GOMAXPROCS 2: -cpu 2).
func BenchmarkCreateHost(b *testing.B) {
	b.Run("alone", func(b *testing.B) { benchCreateHost(b, newEnv(b, httpapi.Options{})) })
	b.Run("batched", func(b *testing.B) {
		st, err := sqlstore.Open(context.Background(), filepath.Join(b.TempDir(), "eim.db"), sqlstore.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		bt := inventory.NewBatcher(st, inventory.BatcherOptions{})
		b.Cleanup(bt.Close)
		benchCreateHost(b, newEnvWith(b, inventory.New(st, inventory.Options{Batcher: bt}), nil, httpapi.Options{}))
	})
}

func benchCreateHost(b *testing.B, e *env) {
	var n atomic.Int64
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		c := e.srv.Client()
		for pb.Next() {
			i := n.Add(1)
			body := fmt.Sprintf(`{"name":"bench-%d","uuid":%q}`, i, newUUID())
			req, _ := http.NewRequest("POST", e.srv.URL+"/v1/projects/p1/compute/hosts", bytes.NewReader([]byte(body)))
			req.Header.Set("Authorization", "Bearer "+tokRW)
			req.Header.Set("Content-Type", "application/json")
			res, err := c.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != 200 {
				b.Errorf("status %d", res.StatusCode)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "creates/s")
}

// BenchmarkListHosts measures a filtered list of 100 hosts.
func BenchmarkListHosts(b *testing.B) {
	e := newEnv(b, httpapi.Options{})
	c := e.srv.Client()
	for i := range 1000 {
		body := fmt.Sprintf(`{"name":"bench-%d","uuid":%q}`, i, newUUID())
		req, _ := http.NewRequest("POST", e.srv.URL+"/v1/projects/p1/compute/hosts", bytes.NewReader([]byte(body)))
		req.Header.Set("Authorization", "Bearer "+tokRW)
		req.Header.Set("Content-Type", "application/json")
		res, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		res.Body.Close()
	}
	url := e.srv.URL + `/v1/projects/p1/compute/hosts?pageSize=100&filter=desiredState%3DHOST_STATE_ONBOARDED%20AND%20name%3D%22bench-1*%22`
	b.ResetTimer()
	for b.Loop() {
		req, _ := http.NewRequest("GET", url, nil)
		req.Header.Set("Authorization", "Bearer "+tokRO)
		res, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			b.Fatalf("status %d", res.StatusCode)
		}
	}
}
