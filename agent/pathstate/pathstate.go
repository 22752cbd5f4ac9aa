// Package pathstate keeps what the agent remembers of each data path of a
// device workload between runs (the upload and download syncers' record
// of the path's files): one small JSON file per path, in a directory per
// workload, written atomically; or, without a directory, in memory.
package pathstate

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/eimhq/eim/internal/atomicfile"
)

// Store is the states of type T of a syncer's data paths. Its zero value
// keeps them in memory. It is not safe for concurrent use.
type Store[T any] struct {
	// Dir holds the states ("": memory only, nothing survives the
	// process).
	Dir string
	// Name says what a state is, in errors ("upload state").
	Name string

	mem map[string]*T
}

// Load returns the state of the data path (workload, target): the one
// saved, or fresh() when none was or the saved one is damaged (does not
// decode, or valid says it is not whole). In memory, the state returned
// is the one kept: changes to it are kept without Save.
func (s *Store[T]) Load(workload, target string, fresh func() *T, valid func(*T) bool) (*T, error) {
	name := fileName(workload, target)
	if s.Dir == "" {
		if s.mem == nil {
			s.mem = map[string]*T{}
		}
		if v := s.mem[name]; v != nil {
			return v, nil
		}
		v := fresh()
		s.mem[name] = v
		return v, nil
	}
	b, err := os.ReadFile(filepath.Join(s.Dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return fresh(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Name, err)
	}
	v := fresh()
	if json.Unmarshal(b, v) != nil || !valid(v) {
		// Damaged: the syncer starts the path afresh.
		return fresh(), nil
	}
	return v, nil
}

// Save writes the state of the data path (workload, target); in memory it
// is kept already.
func (s *Store[T]) Save(workload, target string, v *T) error {
	if s.Dir == "" {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(s.Dir, fileName(workload, target)), b, 0o600, 0o700); err != nil {
		return fmt.Errorf("%s: %w", s.Name, err)
	}
	return nil
}

// Forget drops the states of a workload's data paths (it was removed), so
// that a workload of that name starts afresh.
func (s *Store[T]) Forget(workload string) error {
	if workload == "" || strings.ContainsAny(workload, `/\.`) {
		return fmt.Errorf("forget %s: bad workload name %q", s.Name, workload)
	}
	if s.Dir == "" {
		for k := range s.mem {
			if strings.HasPrefix(k, workload+string(filepath.Separator)) {
				delete(s.mem, k)
			}
		}
		return nil
	}
	return os.RemoveAll(filepath.Join(s.Dir, workload))
}

// All returns every state kept, in no order: those of every workload's
// data paths. A damaged one (see Load) is left out.
func (s *Store[T]) All(fresh func() *T, valid func(*T) bool) ([]*T, error) {
	if s.Dir == "" {
		out := make([]*T, 0, len(s.mem))
		for _, v := range s.mem {
			out = append(out, v)
		}
		return out, nil
	}
	files, err := filepath.Glob(filepath.Join(s.Dir, "*", "*.json"))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Name, err)
	}
	var out []*T
	for _, f := range files {
		b, err := os.ReadFile(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.Name, err)
		}
		v := fresh()
		if json.Unmarshal(b, v) == nil && valid(v) {
			out = append(out, v)
		}
	}
	return out, nil
}

// Delete drops the state of one data path (a workload's other paths
// keep theirs).
func (s *Store[T]) Delete(workload, target string) error {
	name := fileName(workload, target)
	if s.Dir == "" {
		delete(s.mem, name)
		return nil
	}
	err := os.Remove(filepath.Join(s.Dir, name))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: %w", s.Name, err)
	}
	// The workload's directory goes with its last state.
	_ = os.Remove(filepath.Join(s.Dir, workload))
	return nil
}

// fileName is the state file of a data path: a directory per workload, a
// file named by a digest of the target (targets are paths).
func fileName(workload, target string) string {
	sum := sha256.Sum256([]byte(target))
	return filepath.Join(workload, hex.EncodeToString(sum[:8])+".json")
}
