package eim_test

import (
	"strings"
	"testing"

	"github.com/eimhq/eim"
)

func TestLabelSelectorMatches(t *testing.T) {
	labels := map[string]string{"line": "1", "eim.io/arch": "amd64", "zone": "north"}
	for _, tc := range []struct {
		name string
		sel  *eim.LabelSelector
		want bool
	}{
		{"nil selects nothing", nil, false},
		{"matchLabels", &eim.LabelSelector{MatchLabels: map[string]string{"line": "1"}}, true},
		{"matchLabels other value", &eim.LabelSelector{MatchLabels: map[string]string{"line": "2"}}, false},
		{"matchLabels absent", &eim.LabelSelector{MatchLabels: map[string]string{"room": "1"}}, false},
		{"In", &eim.LabelSelector{MatchExpressions: []eim.LabelSelectorRequirement{{Key: "eim.io/arch", Operator: "In", Values: []string{"arm64", "amd64"}}}}, true},
		{"In absent", &eim.LabelSelector{MatchExpressions: []eim.LabelSelectorRequirement{{Key: "room", Operator: "In", Values: []string{"1"}}}}, false},
		{"NotIn", &eim.LabelSelector{MatchExpressions: []eim.LabelSelectorRequirement{{Key: "zone", Operator: "NotIn", Values: []string{"south"}}}}, true},
		{"NotIn absent", &eim.LabelSelector{MatchExpressions: []eim.LabelSelectorRequirement{{Key: "room", Operator: "NotIn", Values: []string{"1"}}}}, true},
		{"NotIn hit", &eim.LabelSelector{MatchExpressions: []eim.LabelSelectorRequirement{{Key: "zone", Operator: "NotIn", Values: []string{"north"}}}}, false},
		{"Exists", &eim.LabelSelector{MatchExpressions: []eim.LabelSelectorRequirement{{Key: "zone", Operator: "Exists"}}}, true},
		{"DoesNotExist", &eim.LabelSelector{MatchExpressions: []eim.LabelSelectorRequirement{{Key: "zone", Operator: "DoesNotExist"}}}, false},
		{"all must hold", &eim.LabelSelector{MatchLabels: map[string]string{"line": "1"},
			MatchExpressions: []eim.LabelSelectorRequirement{{Key: "zone", Operator: "DoesNotExist"}}}, false},
		{"unknown operator", &eim.LabelSelector{MatchExpressions: []eim.LabelSelectorRequirement{{Key: "zone", Operator: "Gt"}}}, false},
	} {
		if got := tc.sel.Matches(labels); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestDeviceLabels(t *testing.T) {
	h := &eim.Host{Meta: eim.Meta{ResourceID: "host-0000abcd"}, Name: "gate 7", Hostname: "gate7.local", CPUArchitecture: "x86_64", SiteID: "site-00000001",
		Metadata:          eim.Metadata{{Key: "line", Value: "1"}, {Key: "zone", Value: "own"}},
		InheritedMetadata: eim.Metadata{{Key: "zone", Value: "site"}, {Key: "country", Value: "fr"}},
		Site:              &eim.Site{RegionID: "region-00000001"},
		Instance:          &eim.Instance{OS: &eim.OS{Name: "Ubuntu 24.04"}}}
	got := eim.DeviceLabels(h)
	want := map[string]string{"line": "1", "zone": "own", "country": "fr", "eim.io/host": "host-0000abcd", "eim.io/name": "gate-7",
		"eim.io/hostname": "gate7.local", "eim.io/arch": "amd64", "eim.io/os": "Ubuntu-24.04", "eim.io/site": "site-00000001", "eim.io/region": "region-00000001"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
}

// Users may not set the device labels' reserved prefix in metadata.
func TestReservedMetadataPrefix(t *testing.T) {
	err := eim.Validate(&eim.Host{Name: "h", SerialNumber: "ABCDE12345", Metadata: eim.Metadata{{Key: "eim.io/arch", Value: "arm64"}}})
	if eim.ErrorCode(err) != eim.EINVALID || !strings.Contains(eim.ErrorMessage(err), "metadata[0].key") {
		t.Fatalf("got %v, want EINVALID naming metadata[0].key", err)
	}
	err = eim.Validate(&eim.Site{Name: "s", Metadata: eim.Metadata{{Key: "eim.io/x", Value: "1"}}})
	if eim.ErrorCode(err) != eim.EINVALID {
		t.Fatalf("site: got %v, want EINVALID", err)
	}
}

func TestCheckEdgeWorkloadSpec(t *testing.T) {
	pw := "p"
	base := func() *eim.EdgeWorkloadSpec {
		return &eim.EdgeWorkloadSpec{Device: "host-0000abcd",
			Pod:     eim.PodTemplate{Spec: eim.PodSpec{Containers: []eim.Container{{Name: "c", Image: "reg.example/app:1"}}}},
			Secrets: []eim.EdgeSecret{{Name: "s", Items: []eim.EdgeSecretItem{{Key: "k", Value: &pw}}}}}
	}
	if w, err := eim.CheckEdgeWorkloadSpec(base(), eim.EdgeWorkloadPolicy{}); err != nil || len(w) != 0 {
		t.Fatalf("a good spec: warnings %q, err %v", w, err)
	}
	for _, image := range []string{"app", "reg.example:5000/app", "reg.example/team/app"} {
		s := base()
		s.Pod.Spec.Containers[0].Image = image
		w, err := eim.CheckEdgeWorkloadSpec(s, eim.EdgeWorkloadPolicy{})
		if err != nil || len(w) != 1 {
			t.Fatalf("image %s: warnings %q, err %v; want one warning", image, w, err)
		}
	}
	for _, image := range []string{"app:1", "reg.example:5000/app:v2", "reg.example/app@sha256:" + strings.Repeat("a", 64)} {
		s := base()
		s.Pod.Spec.Containers[0].Image = image
		if w, err := eim.CheckEdgeWorkloadSpec(s, eim.EdgeWorkloadPolicy{}); err != nil || len(w) != 0 {
			t.Fatalf("image %s: warnings %q, err %v; want none", image, w, err)
		}
	}
	yes := true
	for _, tc := range []struct {
		field string
		edit  func(s *eim.EdgeWorkloadSpec)
	}{
		{"device", func(s *eim.EdgeWorkloadSpec) { s.Device = "host-1" }},
		{"type", func(s *eim.EdgeWorkloadSpec) { s.Type = "vm" }},
		{"pod.spec.containers", func(s *eim.EdgeWorkloadSpec) { s.Pod.Spec.Containers = nil }},
		{"pod.spec.containers[1].name", func(s *eim.EdgeWorkloadSpec) {
			s.Pod.Spec.Containers = append(s.Pod.Spec.Containers, s.Pod.Spec.Containers[0])
		}},
		{"pod.spec.restartPolicy", func(s *eim.EdgeWorkloadSpec) { s.Pod.Spec.RestartPolicy = "Sometimes" }},
		{"pod.spec.containers[0].securityContext.privileged", func(s *eim.EdgeWorkloadSpec) {
			s.Pod.Spec.Containers[0].SecurityContext = &eim.SecurityContext{Privileged: &yes}
		}},
		{"pod.spec.containers[0].env[0].value", func(s *eim.EdgeWorkloadSpec) {
			s.Pod.Spec.Containers[0].Env = []eim.EnvVar{{Name: "aws_secret_access_key", Value: "x"}}
		}},
		{"pod.spec.containers[0].ports[0].containerPort", func(s *eim.EdgeWorkloadSpec) {
			s.Pod.Spec.Containers[0].Ports = []eim.ContainerPort{{ContainerPort: 70000}}
		}},
		{"pod.spec.volumes[0]", func(s *eim.EdgeWorkloadSpec) {
			s.Pod.Spec.Volumes = []eim.Volume{{Name: "v", EmptyDir: &eim.EmptyDirVolumeSource{}, HostPath: &eim.HostPathVolumeSource{Path: "/x"}}}
		}},
		{"pod.spec.volumes[0].hostPath.path", func(s *eim.EdgeWorkloadSpec) {
			s.Pod.Spec.Volumes = []eim.Volume{{Name: "v", HostPath: &eim.HostPathVolumeSource{Path: "x"}}}
		}},
		{"secrets[0].items[0].value", func(s *eim.EdgeWorkloadSpec) { s.Secrets[0].Items[0].Value = nil }},
		{"data.egress[0].target", func(s *eim.EdgeWorkloadSpec) {
			s.Data = &eim.DataConfig{Egress: []eim.DataPath{{Source: "a", Target: "/abs"}}}
		}},
		{"data.ingress[0].target", func(s *eim.EdgeWorkloadSpec) {
			s.Data = &eim.DataConfig{Ingress: []eim.DataPath{{Source: "a", Target: "x/../../y"}}}
		}},
		{"data.ingress[0].target", func(s *eim.EdgeWorkloadSpec) {
			s.Data = &eim.DataConfig{Ingress: []eim.DataPath{{Source: "a", Target: "x/.."}}}
		}},
		{"data.ingress[0].source", func(s *eim.EdgeWorkloadSpec) {
			s.Data = &eim.DataConfig{Egress: []eim.DataPath{{Source: "out", Target: "o"}}, Ingress: []eim.DataPath{{Source: "out/in", Target: "i"}}}
		}},
		{"data.ingress[0].source", func(s *eim.EdgeWorkloadSpec) {
			s.Data = &eim.DataConfig{Ingress: []eim.DataPath{{Source: "models", Target: "m"}, {Source: "./models", Target: "n"}}}
		}},
	} {
		s := base()
		tc.edit(s)
		_, err := eim.CheckEdgeWorkloadSpec(s, eim.EdgeWorkloadPolicy{})
		if eim.ErrorCode(err) != eim.EINVALID || !strings.HasPrefix(eim.ErrorMessage(err), tc.field+":") {
			t.Errorf("%s: got %v, want EINVALID naming it", tc.field, err)
		}
	}
	// Privileged and the host's network where the project allows them.
	s := base()
	s.Pod.Spec.HostNetwork = true
	s.Pod.Spec.Containers[0].SecurityContext = &eim.SecurityContext{Privileged: &yes}
	if _, err := eim.CheckEdgeWorkloadSpec(s, eim.EdgeWorkloadPolicy{AllowPrivileged: true}); err != nil {
		t.Fatalf("allowed privileged: %v", err)
	}
}
