package workloads

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"strconv"

	"gopkg.in/yaml.v3"

	"github.com/eimhq/eim"
	workloadsv1 "github.com/eimhq/eim/proto/eim/workloads/v1"
	"github.com/eimhq/eim/seal"
)

// What a device is sent of a workload (render): the pod as a Kubernetes
// Pod manifest named after the workload and labelled as the agent's pod
// runner labels its pods (agent/pods: eim.io/edge-workload,
// eim.io/revision), its config maps as ConfigMap manifests, its secrets
// and registry passwords opened from their seal only for this answer, and
// its data paths.
//
// Data paths: a workload with any gets a hostPath volume "eim-data" at
// DeviceDataRoot/<workload>/data (DirectoryOrCreate), mounted at /export
// in every container, as Flotta did; a data path's source is a directory
// below /export, so on the device DeviceDataRoot/<workload>/data/<source>.

// DeviceDataRoot is the directory of the workloads' data on a device.
const DeviceDataRoot = "/var/lib/eim-agent/workloads"

// Labels of a rendered pod (agent/pods' names; the agent sets them too).
const (
	labelWorkload = "eim.io/edge-workload"
	labelRevision = "eim.io/revision"
	dataVolume    = "eim-data"
	exportMount   = "/export"
)

// render returns the device's copy of a workload at a revision.
func render(key *seal.Key, project string, dw eim.DeviceWorkload) (*workloadsv1.Workload, error) {
	spec, err := openSpec(key, project, dw.Name, dw.Spec)
	if err != nil {
		return nil, err
	}
	out := &workloadsv1.Workload{Name: dw.Name, Revision: dw.Revision}
	pod := spec.Pod.Spec
	if d := spec.Data; d != nil && len(d.Egress)+len(d.Ingress) > 0 {
		root := path.Join(DeviceDataRoot, dw.Name, "data")
		pod.Volumes = append(append([]eim.Volume(nil), pod.Volumes...), eim.Volume{Name: dataVolume, HostPath: &eim.HostPathVolumeSource{Path: root, Type: "DirectoryOrCreate"}})
		pod.Containers = append([]eim.Container(nil), pod.Containers...)
		for i := range pod.Containers {
			c := &pod.Containers[i]
			c.VolumeMounts = append(append([]eim.VolumeMount(nil), c.VolumeMounts...), eim.VolumeMount{Name: dataVolume, MountPath: exportMount})
		}
		for _, p := range d.Egress {
			out.DataPaths = append(out.DataPaths, dataPath(workloadsv1.DataPath_DIRECTION_EGRESS, root, p))
		}
		for _, p := range d.Ingress {
			out.DataPaths = append(out.DataPaths, dataPath(workloadsv1.DataPath_DIRECTION_INGRESS, root, p))
		}
	}
	specMap, err := plain(pod)
	if err != nil {
		return nil, err
	}
	doc := map[string]any{
		"apiVersion": "v1",
		"kind":       "Pod",
		"metadata": map[string]any{
			"name":   dw.Name,
			"labels": map[string]any{labelWorkload: dw.Name, labelRevision: strconv.FormatInt(dw.Revision, 10)},
		},
		"spec": specMap,
	}
	if out.PodYaml, err = yamlOf(doc); err != nil {
		return nil, err
	}
	for _, cm := range spec.ConfigMaps {
		data := map[string]any{}
		for k, v := range cm.Data {
			data[k] = v
		}
		b, err := yamlOf(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": cm.Name}, "data": data})
		if err != nil {
			return nil, err
		}
		out.ConfigMaps = append(out.ConfigMaps, b)
	}
	for _, sec := range spec.Secrets {
		ps := &workloadsv1.Secret{Name: sec.Name}
		for _, it := range sec.Items {
			ps.Items = append(ps.Items, &workloadsv1.SecretItem{Key: it.Key, Value: []byte(*it.Value)})
		}
		out.Secrets = append(out.Secrets, ps)
	}
	if r := spec.ImageRegistries; r != nil {
		for _, a := range r.Auths {
			out.RegistryAuth = append(out.RegistryAuth, &workloadsv1.RegistryAuth{Registry: a.Registry, Username: a.Username, Password: *a.Password})
		}
	}
	return out, nil
}

func dataPath(dir workloadsv1.DataPath_Direction, root string, p eim.DataPath) *workloadsv1.DataPath {
	every := p.IntervalSeconds
	if every == 0 {
		every = 15 // Flotta's fixed period
	}
	return &workloadsv1.DataPath{Direction: dir, Source: path.Join(root, p.Source), Target: path.Clean(p.Target), IntervalSeconds: every}
}

// plain turns v into maps, slices and scalars through its JSON form (the
// wire names), with integers kept integers.
func plain(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		return nil, err
	}
	return numbers(out), nil
}

func numbers(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			v[k] = numbers(x)
		}
	case []any:
		for i, x := range v {
			v[i] = numbers(x)
		}
	case json.Number:
		if n, err := v.Int64(); err == nil {
			return n
		}
		f, _ := v.Float64()
		return f
	}
	return v
}

func yamlOf(doc any) ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	return buf.Bytes(), nil
}

// Places of sealed values (eim.EdgeWorkloadSecretPurpose).
func secretPlace(secret, key string) string { return "secret/" + secret + "/" + key }
func registryPlace(registry string) string  { return "registry/" + registry }

// cloneSpec returns a deep copy of s (through its JSON form).
func cloneSpec(s eim.EdgeWorkloadSpec) eim.EdgeWorkloadSpec {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err) // a spec always marshals
	}
	var out eim.EdgeWorkloadSpec
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return out
}

// openSpec returns a copy of a stored spec with its sealed values opened.
func openSpec(key *seal.Key, project, name string, s eim.EdgeWorkloadSpec) (eim.EdgeWorkloadSpec, error) {
	out := cloneSpec(s)
	for i := range out.Secrets {
		sec := &out.Secrets[i]
		for j := range sec.Items {
			it := &sec.Items[j]
			if it.Value == nil {
				continue
			}
			v, err := key.OpenText(*it.Value, eim.EdgeWorkloadSecretPurpose(project, name, secretPlace(sec.Name, it.Key)))
			if err != nil {
				return out, fmt.Errorf("edge workload %s: secret %s/%s: %w", name, sec.Name, it.Key, err)
			}
			it.Value = &v
		}
	}
	if r := out.ImageRegistries; r != nil {
		for i := range r.Auths {
			a := &r.Auths[i]
			if a.Password == nil {
				continue
			}
			v, err := key.OpenText(*a.Password, eim.EdgeWorkloadSecretPurpose(project, name, registryPlace(a.Registry)))
			if err != nil {
				return out, fmt.Errorf("edge workload %s: registry %s: %w", name, a.Registry, err)
			}
			a.Password = &v
		}
	}
	return out, nil
}

// sealSpec returns a copy of a plain spec with its secret values sealed.
func sealSpec(key *seal.Key, project, name string, s eim.EdgeWorkloadSpec) eim.EdgeWorkloadSpec {
	out := cloneSpec(s)
	for i := range out.Secrets {
		sec := &out.Secrets[i]
		for j := range sec.Items {
			it := &sec.Items[j]
			v := key.SealText(*it.Value, eim.EdgeWorkloadSecretPurpose(project, name, secretPlace(sec.Name, it.Key)))
			it.Value = &v
		}
	}
	if r := out.ImageRegistries; r != nil {
		for i := range r.Auths {
			a := &r.Auths[i]
			v := key.SealText(*a.Password, eim.EdgeWorkloadSecretPurpose(project, name, registryPlace(a.Registry)))
			a.Password = &v
		}
	}
	return out
}

// redact returns a copy of a spec without its secret values and
// registry passwords: what the API answers.
func redact(s eim.EdgeWorkloadSpec) eim.EdgeWorkloadSpec {
	out := cloneSpec(s)
	for i := range out.Secrets {
		for j := range out.Secrets[i].Items {
			out.Secrets[i].Items[j].Value = nil
		}
	}
	if r := out.ImageRegistries; r != nil {
		for i := range r.Auths {
			r.Auths[i].Password = nil
		}
	}
	return out
}

// fillFrom gives the left-out secret values and registry passwords of a
// request's spec those of prev (an opened spec) for the same secret and
// key or registry.
func fillFrom(in *eim.EdgeWorkloadSpec, prev *eim.EdgeWorkloadSpec) {
	if prev == nil {
		return
	}
	old := map[string]*string{}
	for _, sec := range prev.Secrets {
		for _, it := range sec.Items {
			old[sec.Name+"\x00"+it.Key] = it.Value
		}
	}
	for i := range in.Secrets {
		for j := range in.Secrets[i].Items {
			it := &in.Secrets[i].Items[j]
			if it.Value == nil {
				it.Value = old[in.Secrets[i].Name+"\x00"+it.Key]
			}
		}
	}
	if in.ImageRegistries == nil || prev.ImageRegistries == nil {
		return
	}
	pw := map[string]*string{}
	for _, a := range prev.ImageRegistries.Auths {
		pw[a.Registry] = a.Password
	}
	for i := range in.ImageRegistries.Auths {
		a := &in.ImageRegistries.Auths[i]
		if a.Password == nil {
			a.Password = pw[a.Registry]
		}
	}
}
