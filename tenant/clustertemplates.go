package tenant

import (
	"encoding/json"

	"github.com/eimhq/eim"
)

// The default cluster templates: the original's three baseline variants,
// told apart by their pod security (the Kubernetes Pod Security
// Standards' levels, enforced by the API server's admission): baseline,
// privileged (no restriction, for system workloads) and restricted
// (hardened pods only, and fewer bundled components).

// K3sVersion is the k3s release the default templates install.
const K3sVersion = "v1.33.5+k3s1"

// DefaultClusterTemplate is the template a project's clusters get when
// they name none.
const DefaultClusterTemplate = "baseline"

// psaFile is where the control plane reads its admission configuration.
const psaFile = "/var/lib/rancher/k3s/server/psa.yaml"

// tlsCiphers are the TLS suites the API server and kubelets accept.
const tlsCiphers = "--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"

// clusterTemplate makes a default template of a pod security level.
func clusterTemplate(name, desc, level string, disable []string) eim.ClusterTemplate {
	spec := map[string]any{
		"agentConfig": map[string]any{
			"airGapped":   true,
			"kubeletArgs": []string{"--max-pods=250", tlsCiphers},
		},
		"serverConfig": map[string]any{
			"kubeApiServerArg":  []string{tlsCiphers},
			"clusterDomain":     "cluster.edge",
			"disableComponents": disable,
		},
		"version": K3sVersion,
	}
	if level != "privileged" {
		spec["files"] = []map[string]any{{"path": psaFile, "content": eim.PodSecurityAdmission(level), "permissions": "0600"}}
		sc := spec["serverConfig"].(map[string]any)
		sc["kubeApiServerArg"] = []string{tlsCiphers, "--admission-control-config-file=" + psaFile}
	}
	cfg := map[string]any{
		"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2",
		"kind":       "KThreesControlPlaneTemplate",
		"metadata":   map[string]any{"name": name},
		"spec":       map[string]any{"template": map[string]any{"spec": map[string]any{"kthreesConfigSpec": spec}}},
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		panic(err) // maps of strings
	}
	return eim.ClusterTemplate{
		Name: name, Version: "v0.1.0", KubernetesVersion: K3sVersion, Description: desc,
		ControlPlaneProvider: "k3s", InfraProvider: "intel", Configuration: b,
		Network: eim.ClusterNetwork{Pods: eim.NetworkRanges{CIDRBlocks: []string{"10.45.0.0/16"}}, Services: eim.NetworkRanges{CIDRBlocks: []string{"10.46.0.0/16"}}},
		Labels:  map[string]string{"default-extension": name},
	}
}

// ClusterTemplates are the default templates of this release.
func ClusterTemplates() []eim.ClusterTemplate {
	return []eim.ClusterTemplate{
		clusterTemplate("baseline", "Baseline cluster template (k3s): pods held to the baseline Pod Security Standard", "baseline", nil),
		clusterTemplate("privileged", "Privileged cluster template (k3s): no pod security restriction, for system workloads", "privileged", nil),
		clusterTemplate("restricted", "Restricted cluster template (k3s): pods held to the restricted Pod Security Standard; metrics-server, traefik and servicelb left out",
			"restricted", []string{"metrics-server", "traefik", "servicelb"}),
	}
}
