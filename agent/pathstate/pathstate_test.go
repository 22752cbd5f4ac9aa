package pathstate_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eimhq/eim/agent/pathstate"
)

type files struct{ Files map[string]int }

func fresh() *files       { return &files{Files: map[string]int{}} }
func whole(f *files) bool { return f.Files != nil }
func count(t *testing.T, s *pathstate.Store[files], w, tg string) int {
	t.Helper()
	f, err := s.Load(w, tg, fresh, whole)
	if err != nil {
		t.Fatal(err)
	}
	return len(f.Files)
}

func TestOnDisk(t *testing.T) {
	dir := t.TempDir()
	s := &pathstate.Store[files]{Dir: dir, Name: "test state"}
	f, err := s.Load("cam", "out/a", fresh, whole)
	if err != nil || len(f.Files) != 0 {
		t.Fatalf("first load: got %v, %v; want an empty state", f, err)
	}
	f.Files["x"] = 1
	if count(t, s, "cam", "out/a") != 0 {
		t.Fatal("a change not saved was kept on disk")
	}
	if err := s.Save("cam", "out/a", f); err != nil {
		t.Fatal(err)
	}
	// Another store on the same directory (the agent restarted).
	s2 := &pathstate.Store[files]{Dir: dir, Name: "test state"}
	if got := count(t, s2, "cam", "out/a"); got != 1 {
		t.Fatalf("after a restart: got %d files, want 1", got)
	}
	if got := count(t, s2, "cam", "out/b"); got != 0 {
		t.Fatalf("another target: got %d files, want 0", got)
	}
	// A damaged file: a fresh state.
	var name string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			name = p
		}
		return nil
	})
	for _, bad := range []string{"{not json", `{"Files":null}`} {
		if err := os.WriteFile(name, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := count(t, s2, "cam", "out/a"); got != 0 {
			t.Fatalf("damaged state %q: got %d files, want a fresh state", bad, got)
		}
	}
	if err := s2.Save("cam", "out/a", f); err != nil {
		t.Fatal(err)
	}
	if err := s2.Forget("cam"); err != nil {
		t.Fatal(err)
	}
	if got := count(t, s2, "cam", "out/a"); got != 0 {
		t.Fatalf("after Forget: got %d files, want 0", got)
	}
}

func TestInMemory(t *testing.T) {
	var s pathstate.Store[files]
	f, err := s.Load("cam", "out", fresh, whole)
	if err != nil {
		t.Fatal(err)
	}
	f.Files["x"] = 1 // kept without Save
	if got := count(t, &s, "cam", "out"); got != 1 {
		t.Fatalf("in memory: got %d files, want 1", got)
	}
	if got := count(t, &s, "camera", "out"); got != 0 {
		t.Fatalf("a workload whose name starts alike: got %d files, want 0", got)
	}
	if err := s.Forget("cam"); err != nil {
		t.Fatal(err)
	}
	if got := count(t, &s, "cam", "out"); got != 0 {
		t.Fatalf("after Forget: got %d files, want 0", got)
	}
}

func TestForgetRefusesBadNames(t *testing.T) {
	s := &pathstate.Store[files]{Dir: t.TempDir(), Name: "test state"}
	for _, w := range []string{"", "..", "a/b", `a\b`} {
		if err := s.Forget(w); err == nil || !strings.Contains(err.Error(), "bad workload name") {
			t.Errorf("Forget(%q): got %v, want a bad workload name error", w, err)
		}
	}
}

// TestAllDelete: every state is listed (a damaged one left out), on disk
// and in memory, and Delete drops one data path's alone.
func TestAllDelete(t *testing.T) {
	for _, dir := range []string{t.TempDir(), ""} {
		s := &pathstate.Store[files]{Dir: dir, Name: "test state"}
		for i, p := range [][2]string{{"cam", "a"}, {"cam", "b"}, {"gw", "a"}} {
			f, _ := s.Load(p[0], p[1], fresh, whole)
			f.Files["n"] = i
			if err := s.Save(p[0], p[1], f); err != nil {
				t.Fatal(err)
			}
		}
		if dir != "" {
			if err := os.WriteFile(filepath.Join(dir, "gw", "bad.json"), []byte("{"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		all, err := s.All(fresh, whole)
		if err != nil || len(all) != 3 {
			t.Fatalf("All (dir %q): got %d states, %v; want 3", dir, len(all), err)
		}
		if err := s.Delete("cam", "a"); err != nil {
			t.Fatal(err)
		}
		if err := s.Delete("cam", "nothing"); err != nil {
			t.Fatalf("delete of a state that is not: %v", err)
		}
		all, _ = s.All(fresh, whole)
		if len(all) != 2 || count(t, s, "cam", "b") != 1 || count(t, s, "cam", "a") != 0 {
			t.Fatalf("after Delete (dir %q): %d states, want cam/b and gw/a", dir, len(all))
		}
	}
}
