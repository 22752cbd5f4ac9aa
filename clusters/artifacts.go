package clusters

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/eimhq/eim"
	clusterv1 "github.com/eimhq/eim/proto/eim/cluster/v1"
)

// The artifact store: files an operator puts in a directory (--cluster-
// artifacts), served to nodes on the agent listener with their own token,
// for sites that cannot download k3s (air-gapped). Its layout:
//
//	DIR/k3s/<kubernetesVersion>/k3s                           the binary
//	DIR/k3s/<kubernetesVersion>/k3s-airgap-images-amd64.tar.zst  images (.tar, .tar.gz, .tar.zst)
//
// A template whose artifacts name URLs takes them from there instead. The
// server computes each file's SHA-256 (once per size and modification
// time) and puts it in the plan; the node checks what it downloads.

// ArtifactsPath is the store's path on the agent listener.
const ArtifactsPath = "/eim.cluster.v1/artifacts/"

type sumEntry struct {
	size int64
	mod  time.Time
	sum  string
}

// artifactSums caches the files' digests.
type artifactSums struct {
	mu   sync.Mutex
	sums map[string]sumEntry
}

var imageSuffixes = []string{".tar", ".tar.gz", ".tar.zst"}

// artifacts returns what the nodes of template t download.
func (s *Service) artifacts(t *eim.ClusterTemplate) ([]*clusterv1.Artifact, error) {
	var out []*clusterv1.Artifact
	if len(t.Artifacts) > 0 {
		for _, a := range t.Artifacts {
			k := clusterv1.Artifact_KIND_IMAGES
			if a.Kind == "binary" {
				k = clusterv1.Artifact_KIND_BINARY
			}
			out = append(out, &clusterv1.Artifact{Kind: k, Name: artifactName(a.Kind, a.URL), Url: a.URL, Sha256: a.SHA256})
		}
		return out, nil
	}
	if s.o.Artifacts == "" {
		return nil, nil // the node has k3s already (the OS image carries it)
	}
	dir := filepath.Join(s.o.Artifacts, "k3s", t.KubernetesVersion)
	ents, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, eim.Errorf(eim.EUNAVAILABLE, "the artifact store has no k3s %s (put the binary at %s)", t.KubernetesVersion, filepath.Join(dir, "k3s"))
	}
	if err != nil {
		return nil, fmt.Errorf("artifact store: %w", err)
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		if e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	for _, n := range names {
		kind := clusterv1.Artifact_KIND_UNSPECIFIED
		switch {
		case n == "k3s":
			kind = clusterv1.Artifact_KIND_BINARY
		case hasSuffix(n, imageSuffixes):
			kind = clusterv1.Artifact_KIND_IMAGES
		default:
			continue
		}
		p := filepath.Join(dir, n)
		sum, size, err := s.sums.of(p)
		if err != nil {
			return nil, fmt.Errorf("artifact store: %w", err)
		}
		out = append(out, &clusterv1.Artifact{Kind: kind, Name: n, Url: ArtifactsPath + "k3s/" + t.KubernetesVersion + "/" + n, Sha256: sum, Size: uint64(size)})
	}
	return out, nil
}

func hasSuffix(n string, sfx []string) bool {
	for _, s := range sfx {
		if strings.HasSuffix(n, s) {
			return true
		}
	}
	return false
}

// of returns a file's SHA-256 and size, computed again only when it
// changed.
func (a *artifactSums) of(p string) (string, int64, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return "", 0, err
	}
	a.mu.Lock()
	e, ok := a.sums[p]
	a.mu.Unlock()
	if ok && e.size == fi.Size() && e.mod.Equal(fi.ModTime()) {
		return e.sum, e.size, nil
	}
	f, err := os.Open(p)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", 0, err
	}
	e = sumEntry{size: fi.Size(), mod: fi.ModTime(), sum: hex.EncodeToString(h.Sum(nil))}
	a.mu.Lock()
	if a.sums == nil {
		a.sums = map[string]sumEntry{}
	}
	a.sums[p] = e
	a.mu.Unlock()
	return e.sum, e.size, nil
}

// ArtifactHandler serves the artifact store (GET, ranges too) under
// ArtifactsPath; the caller wraps it in node authentication. Only regular
// files under the directory are served: no listing, no dot files, no
// link out of it.
func (s *Service) ArtifactHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if s.o.Artifacts == "" {
			http.Error(w, "this server has no artifact store (--cluster-artifacts)", http.StatusNotFound)
			return
		}
		rel := strings.TrimPrefix(r.URL.Path, ArtifactsPath)
		clean := filepath.Clean("/" + rel)
		if rel == "" || clean != "/"+rel || strings.Contains(rel, "/.") || strings.HasPrefix(rel, ".") {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		root, err := os.OpenRoot(s.o.Artifacts)
		if err != nil {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		defer root.Close()
		f, err := root.Open(rel)
		if err != nil {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil || !fi.Mode().IsRegular() {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		http.ServeContent(w, r, fi.Name(), fi.ModTime(), f)
	})
}
