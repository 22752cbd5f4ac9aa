package httpapi_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eimhq/eim/httpapi"
	"github.com/eimhq/eim/internal/syncbuf"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/sqlstore"
)

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer = syncbuf.Buffer

// TestInternalErrors breaks the store under the handler: the client gets a
// 500 that says nothing of the cause; the log gets it once, with the
// request ID.
func TestInternalErrors(t *testing.T) {
	ctx := context.Background()
	st, err := sqlstore.Open(ctx, filepath.Join(t.TempDir(), "eim.db"), sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	inv := inventory.New(st, inventory.Options{})
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e := newEnvWith(t, inv, nil, httpapi.Options{Logger: log})
	e.must(t, 200, "GET", "~/regions", tokRO, nil) // the project is cached now
	st.Close()

	req := httptest.NewRequest("GET", "/v1/projects/p1/regions", nil)
	req.Header.Set("Authorization", "Bearer "+tokRO)
	req.Header.Set("X-Request-Id", "req-42")
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	if rec.Code != 500 || strings.TrimSpace(rec.Body.String()) != `{"code":"Internal","message":"internal error"}` {
		t.Fatalf("got %d %s, want 500 with the plain internal error body", rec.Code, rec.Body)
	}
	out := logs.String()
	if n := strings.Count(out, "internal error"); n != 1 || !strings.Contains(out, "request_id=req-42") {
		t.Errorf("log got %d internal error lines (want 1) with request_id=req-42:\n%s", n, out)
	}
	if !strings.Contains(out, `msg="http request" method=GET path=/v1/projects/p1/regions status=500`) {
		t.Errorf("log has no debug request line for the failed request:\n%s", out)
	}
}
