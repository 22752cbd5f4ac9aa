package eim

import (
	"fmt"
	"path"
	"regexp"
	"strings"
	"time"
)

// Checks of an edge workload's name and spec (EdgeWorkloadSpec). The
// errors are EINVALID, naming the field by its wire path
// (pod.spec.containers[0].image).

var (
	reDNSLabel    = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	reLabelKey    = regexp.MustCompile(`^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)
	reSelValue    = regexp.MustCompile(`^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$`)
	reEnvName     = regexp.MustCompile(`^[-._a-zA-Z][-._a-zA-Z0-9]*$`)
	reDataKey     = regexp.MustCompile(`^[-._a-zA-Z0-9]{1,253}$`)
	reQuantity    = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?(m|k|Ki|M|Mi|G|Gi|T|Ti)?$`)
	reRegistry    = regexp.MustCompile(`^[a-zA-Z0-9]([-a-zA-Z0-9.]*[a-zA-Z0-9])?(:[0-9]{1,5})?$`)
	reSecretyName = regexp.MustCompile(`(?i)(PASSWORD|PASSWD|TOKEN|SECRET|API_?KEY|PRIVATE_?KEY|CREDENTIAL)`)
)

// Bounds of a workload.
const (
	MaxEdgeWorkloadContainers = 32
	MaxEdgeWorkloadItems      = 64      // volumes, env, ports, config maps, secrets, … per list
	MaxEdgeWorkloadValue      = 1 << 20 // a config map's or secret's value, bytes
)

// CheckEdgeWorkloadName checks a workload's name: a DNS label, as
// Kubernetes' object names (it names the pod on the device).
func CheckEdgeWorkloadName(name string) error {
	if !reDNSLabel.MatchString(name) {
		return Errorf(EINVALID, "name: %q is not a DNS label (lower-case letters, digits and '-', at most 63, starting and ending with a letter or digit)", name)
	}
	return nil
}

// EdgeWorkloadPolicy is what a project allows its workloads.
type EdgeWorkloadPolicy struct {
	// AllowPrivileged admits privileged containers and the host's network
	// (ProjectSettings.EdgeWorkloadsAllowPrivileged).
	AllowPrivileged bool
}

// CheckEdgeWorkloadSpec checks s, whose secret values and registry
// passwords must all be set (a request's left-out values already filled
// from the previous revision). It returns warnings: what is allowed but
// likely a mistake (an image without a tag or digest).
func CheckEdgeWorkloadSpec(s *EdgeWorkloadSpec, pol EdgeWorkloadPolicy) (warnings []string, err error) {
	c := &specCheck{pol: pol, cms: map[string]map[string]bool{}, secrets: map[string]map[string]bool{}}
	c.run(s)
	if c.err != nil {
		return nil, c.err
	}
	return c.warnings, nil
}

type specCheck struct {
	pol      EdgeWorkloadPolicy
	err      error
	warnings []string
	cms      map[string]map[string]bool // config map → keys
	secrets  map[string]map[string]bool
}

func (c *specCheck) fail(field, format string, args ...any) {
	if c.err == nil {
		c.err = Errorf(EINVALID, "%s: %s", field, fmt.Sprintf(format, args...))
	}
}

func (c *specCheck) max(field string, n int) bool {
	if n > MaxEdgeWorkloadItems {
		c.fail(field, "has %d items, at most %d allowed", n, MaxEdgeWorkloadItems)
		return false
	}
	return true
}

func (c *specCheck) run(s *EdgeWorkloadSpec) {
	switch {
	case s.DeviceSelector == nil && s.Device == "":
		c.fail("deviceSelector", "required (or device, one host's ID)")
	case s.DeviceSelector != nil && s.Device != "":
		c.fail("device", "give deviceSelector or device, not both")
	case s.Device != "":
		if err := CheckID(KindHost, "device", s.Device); err != nil {
			c.err = err
		}
	default:
		c.selector("deviceSelector", s.DeviceSelector)
	}
	if s.Type != "" && s.Type != "pod" {
		c.fail("type", "%q: the only type is \"pod\"", s.Type)
	}
	c.configMaps(s.ConfigMaps)
	c.secretList(s.Secrets)
	c.registries(s.ImageRegistries)
	c.data(s.Data)
	c.pod(&s.Pod.Spec)
	if s.RolloutPolicy != nil {
		c.rollout("rolloutPolicy", s.RolloutPolicy)
	}
}

// MaxRolloutBatches bounds a rollout policy's batches.
const MaxRolloutBatches = 20

func (c *specCheck) rollout(f string, p *RolloutPolicy) {
	if len(p.Batches) > MaxRolloutBatches {
		c.fail(f+".batches", "has %d batches, at most %d allowed", len(p.Batches), MaxRolloutBatches)
	}
	c.threshold(f+".successThreshold", p.SuccessThreshold)
	c.timeout(f+".updateTimeout", p.UpdateTimeout)
	for i, b := range p.Batches {
		bf := fmt.Sprintf("%s.batches[%d]", f, i)
		if b.Limit == "" {
			c.fail(bf+".limit", "required: a count of devices (10) or a share (\"10%%\")")
		} else if _, _, err := b.Limit.Parse(); err != nil {
			c.fail(bf+".limit", "%v", err)
		}
		if b.Selector != nil {
			c.selector(bf+".selector", b.Selector)
		}
		c.threshold(bf+".successThreshold", b.SuccessThreshold)
		c.timeout(bf+".updateTimeout", b.UpdateTimeout)
	}
	if d := p.DisruptionBudget; d != nil {
		df := f + ".disruptionBudget"
		if d.MaxUnavailable == "" {
			c.fail(df+".maxUnavailable", "required: a count of devices (1 or more) or a share of the group (\"25%%\")")
		} else if _, _, err := d.MaxUnavailable.Parse(); err != nil {
			c.fail(df+".maxUnavailable", "%v (0 would never let a device update)", err)
		}
		if c.max(df+".groupBy", len(d.GroupBy)) {
			seen := map[string]bool{}
			for i, k := range d.GroupBy {
				if !reLabelKey.MatchString(k) {
					c.fail(fmt.Sprintf("%s.groupBy[%d]", df, i), "%q is not a label key", k)
				} else if seen[k] {
					c.fail(fmt.Sprintf("%s.groupBy[%d]", df, i), "%q is given twice", k)
				}
				seen[k] = true
			}
		}
	}
}

func (c *specCheck) threshold(f string, v IntOrPercent) {
	if v == "" {
		return
	}
	if _, _, err := v.Parse(); err != nil {
		c.fail(f, "%v", err)
	}
}

// MaxRolloutUpdateTimeout bounds a rollout's update timeout.
const MaxRolloutUpdateTimeout = 30 * 24 * time.Hour

func (c *specCheck) timeout(f, v string) {
	if v == "" {
		return
	}
	d, err := time.ParseDuration(v)
	switch {
	case err != nil:
		c.fail(f, "%q is not a duration (\"30m\", \"2h\")", v)
	case d < time.Second || d > MaxRolloutUpdateTimeout:
		c.fail(f, "%q: want 1s to 720h", v)
	}
}

func (c *specCheck) selector(f string, sel *LabelSelector) {
	if len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0 {
		c.fail(f, "empty: it would select every device; say so with a matchExpressions of operator Exists on a label every device has (eim.io/host)")
		return
	}
	if !c.max(f+".matchLabels", len(sel.MatchLabels)) || !c.max(f+".matchExpressions", len(sel.MatchExpressions)) {
		return
	}
	for k, v := range sel.MatchLabels {
		if !reLabelKey.MatchString(k) {
			c.fail(f+".matchLabels", "key %q is not a label key", k)
		}
		if !reSelValue.MatchString(v) {
			c.fail(f+".matchLabels."+k, "value %q is not a label value (at most 63 letters, digits, '-', '_', '.')", v)
		}
	}
	for i, r := range sel.MatchExpressions {
		ff := fmt.Sprintf("%s.matchExpressions[%d]", f, i)
		if !reLabelKey.MatchString(r.Key) {
			c.fail(ff+".key", "%q is not a label key", r.Key)
		}
		switch r.Operator {
		case "In", "NotIn":
			if len(r.Values) == 0 {
				c.fail(ff+".values", "required with operator %s", r.Operator)
			}
		case "Exists", "DoesNotExist":
			if len(r.Values) != 0 {
				c.fail(ff+".values", "must be empty with operator %s", r.Operator)
			}
		default:
			c.fail(ff+".operator", "%q: want In, NotIn, Exists or DoesNotExist", r.Operator)
		}
		c.max(ff+".values", len(r.Values))
		for j, v := range r.Values {
			if !reSelValue.MatchString(v) {
				c.fail(fmt.Sprintf("%s.values[%d]", ff, j), "%q is not a label value", v)
			}
		}
	}
}

func (c *specCheck) configMaps(cms []ConfigMap) {
	if !c.max("configmaps", len(cms)) {
		return
	}
	for i, cm := range cms {
		f := fmt.Sprintf("configmaps[%d]", i)
		if !reDNSLabel.MatchString(cm.Name) {
			c.fail(f+".name", "%q is not a DNS label", cm.Name)
		}
		if c.cms[cm.Name] != nil {
			c.fail(f+".name", "%q appears more than once", cm.Name)
		}
		keys := map[string]bool{}
		for k, v := range cm.Data {
			if !reDataKey.MatchString(k) {
				c.fail(f+".data", "key %q: letters, digits, '-', '_' and '.' only", k)
			}
			if len(v) > MaxEdgeWorkloadValue {
				c.fail(f+".data."+k, "longer than %d bytes", MaxEdgeWorkloadValue)
			}
			keys[k] = true
		}
		c.cms[cm.Name] = keys
	}
}

func (c *specCheck) secretList(ss []EdgeSecret) {
	if !c.max("secrets", len(ss)) {
		return
	}
	for i, s := range ss {
		f := fmt.Sprintf("secrets[%d]", i)
		if !reDNSLabel.MatchString(s.Name) {
			c.fail(f+".name", "%q is not a DNS label", s.Name)
		}
		if c.secrets[s.Name] != nil {
			c.fail(f+".name", "%q appears more than once", s.Name)
		}
		keys := map[string]bool{}
		c.max(f+".items", len(s.Items))
		for j, it := range s.Items {
			ff := fmt.Sprintf("%s.items[%d]", f, j)
			if !reDataKey.MatchString(it.Key) {
				c.fail(ff+".key", "%q: letters, digits, '-', '_' and '.' only", it.Key)
			}
			if keys[it.Key] {
				c.fail(ff+".key", "%q appears more than once", it.Key)
			}
			if it.Value == nil {
				c.fail(ff+".value", "required (no earlier revision has this secret's key)")
			} else if len(*it.Value) > MaxEdgeWorkloadValue {
				c.fail(ff+".value", "longer than %d bytes", MaxEdgeWorkloadValue)
			}
			keys[it.Key] = true
		}
		c.secrets[s.Name] = keys
	}
}

func (c *specCheck) registries(r *ImageRegistries) {
	if r == nil || !c.max("imageRegistries.auths", len(r.Auths)) {
		return
	}
	seen := map[string]bool{}
	for i, a := range r.Auths {
		f := fmt.Sprintf("imageRegistries.auths[%d]", i)
		if !reRegistry.MatchString(a.Registry) {
			c.fail(f+".registry", "%q: want host[:port]", a.Registry)
		}
		if seen[a.Registry] {
			c.fail(f+".registry", "%q appears more than once", a.Registry)
		}
		seen[a.Registry] = true
		if a.Username == "" {
			c.fail(f+".username", "required")
		}
		if a.Password == nil || *a.Password == "" {
			c.fail(f+".password", "required (no earlier revision has this registry)")
		}
	}
}

// relPath checks a path that must stay below its root.
func (c *specCheck) relPath(f, p string) {
	clean := path.Clean(p)
	if p == "" || strings.HasPrefix(p, "/") || clean == ".." || strings.HasPrefix(clean, "../") || len(p) > 256 {
		c.fail(f, "%q: want a relative path that stays below its root (no leading '/', no '..')", p)
	}
}

func (c *specCheck) data(d *DataConfig) {
	if d == nil {
		return
	}
	for dir, list := range map[string][]DataPath{"data.egress": d.Egress, "data.ingress": d.Ingress} {
		if !c.max(dir, len(list)) {
			continue
		}
		targets := map[string]bool{}
		for i, p := range list {
			f := fmt.Sprintf("%s[%d]", dir, i)
			c.relPath(f+".source", p.Source)
			c.relPath(f+".target", p.Target)
			if p.Target != "" && path.Clean(p.Target) == "." {
				// "." would be the workload's whole prefix, not a data
				// path's directory in it.
				c.fail(f+".target", "%q: want a directory below the workload's prefix", p.Target)
			}
			if targets[p.Target] {
				c.fail(f+".target", "%q appears more than once", p.Target)
			}
			targets[p.Target] = true
			if p.IntervalSeconds > 86400 {
				c.fail(f+".intervalSeconds", "%d: at most 86400", p.IntervalSeconds)
			}
		}
	}
	// An ingress directory is the store's copy: another data path in it,
	// or around it, would upload what is downloaded or remove what the
	// other downloads.
	for i, in := range d.Ingress {
		for _, o := range []struct {
			dir  string
			list []DataPath
		}{{"data.egress", d.Egress}, {"data.ingress", d.Ingress}} {
			for j, other := range o.list {
				if o.dir == "data.ingress" && j == i {
					continue
				}
				if nested(in.Source, other.Source) {
					c.fail(fmt.Sprintf("data.ingress[%d].source", i), "%q overlaps %s[%d].source %q: an ingress directory must be a data path's alone", in.Source, o.dir, j, other.Source)
				}
			}
		}
	}
}

// nested says whether one of the relative directories a and b is the
// other or below it.
func nested(a, b string) bool {
	a, b = path.Clean(a), path.Clean(b)
	return a == b || a == "." || b == "." || strings.HasPrefix(a, b+"/") || strings.HasPrefix(b, a+"/")
}

func (c *specCheck) pod(p *PodSpec) {
	const f = "pod.spec"
	if len(p.Containers) == 0 {
		c.fail(f+".containers", "at least one container is required")
	}
	if len(p.Containers) > MaxEdgeWorkloadContainers || len(p.InitContainers) > MaxEdgeWorkloadContainers {
		c.fail(f+".containers", "at most %d containers", MaxEdgeWorkloadContainers)
		return
	}
	switch p.RestartPolicy {
	case "", "Always", "OnFailure", "Never":
	default:
		c.fail(f+".restartPolicy", "%q: want Always, OnFailure or Never", p.RestartPolicy)
	}
	if p.HostNetwork && !c.pol.AllowPrivileged {
		c.fail(f+".hostNetwork", "the host's network is not allowed in this project (project setting edgeWorkloadsAllowPrivileged)")
	}
	if p.Hostname != "" && !reDNSLabel.MatchString(p.Hostname) {
		c.fail(f+".hostname", "%q is not a DNS label", p.Hostname)
	}
	vols := map[string]bool{}
	if c.max(f+".volumes", len(p.Volumes)) {
		for i, v := range p.Volumes {
			c.volume(fmt.Sprintf("%s.volumes[%d]", f, i), v, vols)
		}
	}
	names := map[string]bool{}
	for _, list := range []struct {
		field string
		cs    []Container
	}{{f + ".initContainers", p.InitContainers}, {f + ".containers", p.Containers}} {
		for i, ct := range list.cs {
			c.container(fmt.Sprintf("%s[%d]", list.field, i), &ct, vols, names)
		}
	}
}

func (c *specCheck) volume(f string, v Volume, seen map[string]bool) {
	if !reDNSLabel.MatchString(v.Name) {
		c.fail(f+".name", "%q is not a DNS label", v.Name)
	}
	if seen[v.Name] {
		c.fail(f+".name", "%q appears more than once", v.Name)
	}
	seen[v.Name] = true
	n := 0
	if v.HostPath != nil {
		n++
		if !strings.HasPrefix(v.HostPath.Path, "/") {
			c.fail(f+".hostPath.path", "%q: want an absolute path", v.HostPath.Path)
		}
		switch v.HostPath.Type {
		case "", "DirectoryOrCreate", "Directory", "FileOrCreate", "File", "Socket", "CharDevice", "BlockDevice":
		default:
			c.fail(f+".hostPath.type", "%q is not a hostPath type", v.HostPath.Type)
		}
	}
	if v.EmptyDir != nil {
		n++
	}
	if v.ConfigMap != nil {
		n++
		if c.cms[v.ConfigMap.Name] == nil {
			c.fail(f+".configMap.name", "%q is not among the workload's configmaps", v.ConfigMap.Name)
		}
	}
	if v.Secret != nil {
		n++
		if c.secrets[v.Secret.SecretName] == nil {
			c.fail(f+".secret.secretName", "%q is not among the workload's secrets", v.Secret.SecretName)
		}
	}
	if n != 1 {
		c.fail(f, "give exactly one of hostPath, emptyDir, configMap, secret (got %d)", n)
	}
}

func (c *specCheck) container(f string, ct *Container, vols, names map[string]bool) {
	if !reDNSLabel.MatchString(ct.Name) {
		c.fail(f+".name", "%q is not a DNS label", ct.Name)
	}
	if names[ct.Name] {
		c.fail(f+".name", "%q appears more than once", ct.Name)
	}
	names[ct.Name] = true
	switch {
	case ct.Image == "" || strings.ContainsAny(ct.Image, " \t\n"):
		c.fail(f+".image", "required, without spaces")
	case !imagePinned(ct.Image):
		c.warnings = append(c.warnings, fmt.Sprintf("%s.image: %q has no tag or digest: each device pulls whatever :latest is when it deploys; pin a tag or a digest", f, ct.Image))
	}
	switch ct.ImagePullPolicy {
	case "", "Always", "IfNotPresent", "Never":
	default:
		c.fail(f+".imagePullPolicy", "%q: want Always, IfNotPresent or Never", ct.ImagePullPolicy)
	}
	c.max(f+".command", len(ct.Command))
	c.max(f+".args", len(ct.Args))
	if c.max(f+".env", len(ct.Env)) {
		for i, e := range ct.Env {
			c.env(fmt.Sprintf("%s.env[%d]", f, i), e)
		}
	}
	for i, e := range ct.EnvFrom {
		ff := fmt.Sprintf("%s.envFrom[%d]", f, i)
		switch {
		case (e.ConfigMapRef == nil) == (e.SecretRef == nil):
			c.fail(ff, "give exactly one of configMapRef, secretRef")
		case e.ConfigMapRef != nil && c.cms[e.ConfigMapRef.Name] == nil:
			c.fail(ff+".configMapRef.name", "%q is not among the workload's configmaps", e.ConfigMapRef.Name)
		case e.SecretRef != nil && c.secrets[e.SecretRef.Name] == nil:
			c.fail(ff+".secretRef.name", "%q is not among the workload's secrets", e.SecretRef.Name)
		}
	}
	if c.max(f+".ports", len(ct.Ports)) {
		for i, p := range ct.Ports {
			ff := fmt.Sprintf("%s.ports[%d]", f, i)
			if p.ContainerPort < 1 || p.ContainerPort > 65535 {
				c.fail(ff+".containerPort", "%d: want 1 to 65535", p.ContainerPort)
			}
			if p.HostPort < 0 || p.HostPort > 65535 {
				c.fail(ff+".hostPort", "%d: want 0 to 65535", p.HostPort)
			}
			if p.Protocol != "" && p.Protocol != "TCP" && p.Protocol != "UDP" {
				c.fail(ff+".protocol", "%q: want TCP or UDP", p.Protocol)
			}
		}
	}
	for i, m := range ct.VolumeMounts {
		ff := fmt.Sprintf("%s.volumeMounts[%d]", f, i)
		if !vols[m.Name] {
			c.fail(ff+".name", "%q is not a volume of the pod", m.Name)
		}
		if !strings.HasPrefix(m.MountPath, "/") {
			c.fail(ff+".mountPath", "%q: want an absolute path", m.MountPath)
		}
	}
	if r := ct.Resources; r != nil {
		for kind, m := range map[string]map[string]string{"limits": r.Limits, "requests": r.Requests} {
			for k, q := range m {
				if k != "cpu" && k != "memory" {
					c.fail(f+".resources."+kind, "%q: only cpu and memory", k)
				} else if !reQuantity.MatchString(q) {
					c.fail(f+".resources."+kind+"."+k, "%q is not a quantity (500m, 128Mi, 2)", q)
				}
			}
		}
	}
	if sc := ct.SecurityContext; sc != nil && sc.Privileged != nil && *sc.Privileged && !c.pol.AllowPrivileged {
		c.fail(f+".securityContext.privileged", "privileged containers are not allowed in this project (project setting edgeWorkloadsAllowPrivileged)")
	}
}

// env checks one variable. A literal value of a variable whose name says
// it holds a secret (…PASSWORD…, …TOKEN…, …SECRET…, …API_KEY…,
// …PRIVATE_KEY…, …CREDENTIAL…) is refused: the spec is stored and
// answered in the clear, so the value belongs in a secret.
func (c *specCheck) env(f string, e EnvVar) {
	if !reEnvName.MatchString(e.Name) {
		c.fail(f+".name", "%q is not a variable name", e.Name)
	}
	if e.ValueFrom != nil {
		if e.Value != "" {
			c.fail(f, "give value or valueFrom, not both")
		}
		v := e.ValueFrom
		switch {
		case (v.ConfigMapKeyRef == nil) == (v.SecretKeyRef == nil):
			c.fail(f+".valueFrom", "give exactly one of configMapKeyRef, secretKeyRef")
		case v.ConfigMapKeyRef != nil && !c.cms[v.ConfigMapKeyRef.Name][v.ConfigMapKeyRef.Key]:
			c.fail(f+".valueFrom.configMapKeyRef", "%s/%s is not a key of the workload's configmaps", v.ConfigMapKeyRef.Name, v.ConfigMapKeyRef.Key)
		case v.SecretKeyRef != nil && !c.secrets[v.SecretKeyRef.Name][v.SecretKeyRef.Key]:
			c.fail(f+".valueFrom.secretKeyRef", "%s/%s is not a key of the workload's secrets", v.SecretKeyRef.Name, v.SecretKeyRef.Key)
		}
		return
	}
	if e.Value != "" && reSecretyName.MatchString(e.Name) {
		c.fail(f+".value", "%s looks like a secret, given in plain text: put it in the workload's secrets and use valueFrom.secretKeyRef", e.Name)
	}
}

// imagePinned reports whether an image reference names a tag or a digest.
func imagePinned(ref string) bool {
	if strings.Contains(ref, "@") {
		return true
	}
	last := ref[strings.LastIndex(ref, "/")+1:]
	return strings.Contains(last, ":")
}
