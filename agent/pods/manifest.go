package pods

import (
	"bytes"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/eimhq/eim"
)

// Labels the runner puts on every pod it creates; List selects by the first.
const (
	LabelWorkload = "eim.io/edge-workload"
	LabelRevision = "eim.io/revision"
	// LabelContainers names the pod's containers (comma-separated, sorted):
	// a pod lacking one of them is the remains of an interrupted play.
	LabelContainers = "eim.io/containers"
)

// A workload name is a DNS label, as Kubernetes' object names: it names
// the pod, prefixes its containers and its secrets.
var nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// secretName is the podman secret holding a workload's secret. "_" cannot
// occur in either name, so the pair is unambiguous.
func secretName(workload, secret string) string {
	return "eim_" + workload + "_" + secret
}

// manifest returns the pod YAML to play: p's pod document named after the
// workload, labelled with workload and revision, its secret references
// renamed to the workload's podman secrets, and the names of its
// containers (sorted).
func manifest(p Pod) ([]byte, []string, error) {
	var pod map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(p.YAML))
	if err := dec.Decode(&pod); err != nil {
		return nil, nil, eim.Errorf(eim.EINVALID, "pod YAML of %s: %v", p.Workload, err)
	}
	var extra any
	if err := dec.Decode(&extra); err == nil {
		return nil, nil, eim.Errorf(eim.EINVALID, "pod YAML of %s: one document expected, got more", p.Workload)
	}
	if kind, _ := pod["kind"].(string); kind != "Pod" {
		return nil, nil, eim.Errorf(eim.EINVALID, "pod YAML of %s: kind %q, want Pod", p.Workload, pod["kind"])
	}
	meta := child(pod, "metadata")
	meta["name"] = p.Workload
	labels := child(meta, "labels")
	labels[LabelWorkload] = p.Workload
	labels[LabelRevision] = strconv.FormatInt(p.Revision, 10)

	spec, ok := pod["spec"].(map[string]any)
	if !ok {
		return nil, nil, eim.Errorf(eim.EINVALID, "pod YAML of %s: spec missing", p.Workload)
	}
	rename := func(m map[string]any, key string) error {
		name, _ := m[key].(string)
		if _, ok := p.Secrets[name]; !ok {
			return eim.Errorf(eim.EINVALID, "pod YAML of %s: secret %q is not among the workload's secrets", p.Workload, name)
		}
		m[key] = secretName(p.Workload, name)
		return nil
	}
	for _, list := range []string{"containers", "initContainers"} {
		ctrs, _ := spec[list].([]any)
		for _, c := range ctrs {
			ctr, _ := c.(map[string]any)
			env, _ := ctr["env"].([]any)
			for _, e := range env {
				from, _ := mapAt(e, "valueFrom", "secretKeyRef")
				if from != nil {
					if err := rename(from, "name"); err != nil {
						return nil, nil, err
					}
				}
			}
			envFrom, _ := ctr["envFrom"].([]any)
			for _, e := range envFrom {
				ref, _ := mapAt(e, "secretRef")
				if ref != nil {
					if err := rename(ref, "name"); err != nil {
						return nil, nil, err
					}
				}
			}
		}
	}
	vols, _ := spec["volumes"].([]any)
	for _, v := range vols {
		sec, _ := mapAt(v, "secret")
		if sec != nil {
			if err := rename(sec, "secretName"); err != nil {
				return nil, nil, err
			}
		}
	}
	var names []string
	ctrs, _ := spec["containers"].([]any)
	for _, c := range ctrs {
		ctr, _ := c.(map[string]any)
		name, _ := ctr["name"].(string)
		if !nameRE.MatchString(name) {
			return nil, nil, eim.Errorf(eim.EINVALID, "pod YAML of %s: container name %q is not a DNS label", p.Workload, name)
		}
		names = append(names, name)
	}
	sort.Strings(names)
	labels[LabelContainers] = strings.Join(names, ",")
	out, err := yaml.Marshal(pod)
	if err != nil {
		return nil, nil, fmt.Errorf("pod YAML of %s: %w", p.Workload, err)
	}
	return out, names, nil
}

// child returns m[key] as a map, creating it when absent.
func child(m map[string]any, key string) map[string]any {
	c, ok := m[key].(map[string]any)
	if !ok {
		c = map[string]any{}
		m[key] = c
	}
	return c
}

// mapAt walks v through nested maps by keys.
func mapAt(v any, keys ...string) (map[string]any, bool) {
	m, ok := v.(map[string]any)
	for _, k := range keys {
		if !ok {
			return nil, false
		}
		m, ok = m[k].(map[string]any)
	}
	return m, ok
}

// HostPaths returns the directories of the pod's hostPath volumes that
// podman expects to exist or creates (type "", Directory or
// DirectoryOrCreate), so that the caller creates them before the play:
// kube play refuses a missing directory of type Directory.
func HostPaths(podYAML []byte) ([]string, error) {
	var doc struct {
		Spec struct {
			Volumes []struct {
				Name     string
				HostPath *struct {
					Path string
					Type string
				} `yaml:"hostPath"`
			}
		}
	}
	if err := yaml.Unmarshal(podYAML, &doc); err != nil {
		return nil, eim.Errorf(eim.EINVALID, "pod YAML: %v", err)
	}
	var dirs []string
	for _, v := range doc.Spec.Volumes {
		h := v.HostPath
		if h == nil {
			continue
		}
		switch h.Type {
		case "", "Directory", "DirectoryOrCreate":
		default:
			continue
		}
		if !strings.HasPrefix(h.Path, "/") {
			return nil, eim.Errorf(eim.EINVALID, "pod YAML: volume %s: hostPath %q is not absolute", v.Name, h.Path)
		}
		dirs = append(dirs, h.Path)
	}
	return dirs, nil
}
