package eim

import "regexp"

// Workloads group instances: a workload of kind WORKLOAD_KIND_CLUSTER is a
// cluster, and each of its nodes is a workload member linking it to one
// instance. An instance belongs to at most one workload.

// WorkloadKind says what a workload is.
type WorkloadKind string

const (
	WorkloadKindUnspecified WorkloadKind = "WORKLOAD_KIND_UNSPECIFIED"
	WorkloadKindCluster     WorkloadKind = "WORKLOAD_KIND_CLUSTER"
)

func (WorkloadKind) Values() []string {
	return []string{string(WorkloadKindUnspecified), string(WorkloadKindCluster)}
}

// WorkloadMemberKind says what role an instance plays in its workload.
type WorkloadMemberKind string

const (
	WorkloadMemberKindUnspecified WorkloadMemberKind = "WORKLOAD_MEMBER_KIND_UNSPECIFIED"
	WorkloadMemberKindClusterNode WorkloadMemberKind = "WORKLOAD_MEMBER_KIND_CLUSTER_NODE"
)

func (WorkloadMemberKind) Values() []string {
	return []string{string(WorkloadMemberKindUnspecified), string(WorkloadMemberKindClusterNode)}
}

// Workload is a named group of instances, e.g. a Kubernetes cluster.
// ExternalID links it to what it is outside EIM (the cluster's name in the
// cluster orchestrator); it is unique within a project when set.
type Workload struct {
	Meta
	AliasID string `json:"workloadId" db:"-" eim:"alias"`

	Kind       WorkloadKind `json:"kind" eim:"w"`
	Name       string       `json:"name" eim:"w"`
	ExternalID string       `json:"externalId" eim:"w"`
	Status     string       `json:"status" eim:"w"`

	// Filled on read by the inventory, never stored: the members, each
	// with its instance.
	Members []*WorkloadMember `json:"members" db:"-"`
}

func (*Workload) ResourceKind() Kind { return KindWorkload }

// WorkloadMember puts one instance in one workload. It is created and
// deleted, never changed, and goes with its instance.
type WorkloadMember struct {
	Meta
	AliasID string `json:"workloadMemberId" db:"-" eim:"alias"`

	Kind       WorkloadMemberKind `json:"kind" eim:"w"`
	WorkloadID string             `json:"workloadId" eim:"w,edge=workload:workload"`
	InstanceID string             `json:"instanceId" eim:"w,edge=instance:inst"`

	// Filled on read by the inventory, never stored. Member is the
	// instance again, as the original API shows it under both names.
	Workload *Workload `json:"workload,omitempty" db:"-"`
	Instance *Instance `json:"instance,omitempty" db:"-"`
	Member   *Instance `json:"member,omitempty" db:"-"`
}

func (*WorkloadMember) ResourceKind() Kind { return KindWorkloadMember }

// reWorkloadStatus is the pattern of a workload's status text.
var reWorkloadStatus = regexp.MustCompile(`^[a-zA-Z-_0-9./:;=?@!#,<>*() ]*$`)

func validateWorkload(w *Workload) error {
	var c v
	c.self(KindWorkload, &w.Meta)
	if w.Kind == "" || w.Kind == WorkloadKindUnspecified {
		c.fail("kind", "is required (%s)", WorkloadKindCluster)
	}
	c.add(checkEnum("kind", w.Kind))
	c.str("name", w.Name, 50, reName)
	c.str("externalId", w.ExternalID, 40, reName)
	c.str("status", w.Status, 500, reWorkloadStatus)
	return c.err
}

func validateWorkloadMember(m *WorkloadMember) error {
	var c v
	c.self(KindWorkloadMember, &m.Meta)
	if m.Kind == "" || m.Kind == WorkloadMemberKindUnspecified {
		c.fail("kind", "is required (%s)", WorkloadMemberKindClusterNode)
	}
	c.add(checkEnum("kind", m.Kind))
	c.required("workloadId", m.WorkloadID)
	c.id(KindWorkload, "workloadId", m.WorkloadID)
	c.required("instanceId", m.InstanceID)
	c.id(KindInstance, "instanceId", m.InstanceID)
	return c.err
}
