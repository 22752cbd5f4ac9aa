package pods_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/eimhq/eim/agent/pods"
)

// A pod's registry login reaches the registry podman pulls from (one on
// 127.0.0.1 that asks for basic auth, records it and has no image), and
// leaves nothing behind.
func TestRegistryLogin(t *testing.T) {
	_, w := setup(t, "reg")
	var mu sync.Mutex
	var auths []string
	reg := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		a := r.Header.Get("Authorization")
		if a == "" {
			rw.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(rw, "login", http.StatusUnauthorized)
			return
		}
		mu.Lock()
		auths = append(auths, a)
		mu.Unlock()
		if r.URL.Path == "/v2/" {
			return
		}
		http.Error(rw, `{"errors":[{"code":"MANIFEST_UNKNOWN"}]}`, http.StatusNotFound)
	}))
	defer reg.Close()
	host := strings.TrimPrefix(reg.URL, "http://")
	dir := t.TempDir()
	regConf := filepath.Join(dir, "registries.conf")
	if err := os.WriteFile(regConf, []byte("[[registry]]\nlocation = \""+host+"\"\ninsecure = true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	r := pods.New(pods.Config{ContainersConf: conf, Network: "none", TempDir: tmp,
		Env: append(os.Environ(), "CONTAINERS_REGISTRIES_CONF="+regConf)})
	err := r.Apply(context.Background(), pods.Pod{Workload: w, Revision: 1,
		Registries: []pods.Registry{{Server: host, Username: "device", Password: "pa55word"}},
		YAML:       []byte("apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: main\n    image: " + host + "/private/app:1\n"),
	})
	if err == nil {
		t.Fatal("Apply of an image the registry lacks: got nil, want an error")
	}
	if strings.Contains(err.Error(), "pa55word") {
		t.Errorf("the error shows the password: %v", err)
	}
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("device:pa55word"))
	mu.Lock()
	got := auths
	mu.Unlock()
	if len(got) == 0 || got[0] != want {
		t.Errorf("registry saw Authorization %q, want %q", got, want)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("files left after the play: %v", left)
	}

	bad := pods.Pod{Workload: w, Revision: 2, Registries: []pods.Registry{{Server: "a/b", Username: "u"}}, YAML: podYAML(w, sleeper)}
	if err := r.Apply(context.Background(), bad); err == nil || !strings.Contains(err.Error(), "registries[0]") {
		t.Errorf("Apply with a bad registry: got %v, want an error naming registries[0]", err)
	}
}
