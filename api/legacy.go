package api

// The original API served every project operation twice: under
// /v1/projects/{projectName}/… and under the legacy prefix
// /edge-infra.orchestrator.apis/v2/…, where the project is a query
// parameter (or the ActiveProjectID header, the project's UUID). Its own
// generated client manages sites only through the legacy paths.
//
// Legacy lists those operations, each with its twin under the project
// prefix. httpapi serves a legacy operation with its twin's handler, and
// the document describes it with its twin's operation; neither repeats
// anything else, so a twin changed (or added, like the workloads') is
// changed on both paths.

// LegacyPrefix is the prefix of the legacy paths.
const LegacyPrefix = "/edge-infra.orchestrator.apis/v2"

// ProjectPrefix is the prefix of the project-scoped paths.
const ProjectPrefix = "/v1/projects/{projectName}"

// LegacyProjectParam is the query parameter that names the project on a
// legacy path; LegacyProjectHeader, the header that carries the project's
// UUID when the parameter is absent.
const (
	LegacyProjectParam  = "projectName"
	LegacyProjectHeader = "ActiveProjectID"
)

// LegacyOp is one legacy operation: its method, its path below
// LegacyPrefix, and the path of its twin below ProjectPrefix (same method,
// same {resourceId}).
type LegacyOp struct {
	Method string
	Path   string
	Twin   string
}

// Legacy holds the original's 99 legacy operations. The names differ from
// the twins' in places: the compute kinds lose their /compute/ (hosts,
// instances, operating_systems; the host summary is /hosts_summary), and
// the OS update policies and runs keep only their snake_case spelling.
var Legacy = []LegacyOp{
	{"GET", "/regions", "/regions"},
	{"POST", "/regions", "/regions"},
	{"GET", "/regions/{resourceId}", "/regions/{resourceId}"},
	{"PUT", "/regions/{resourceId}", "/regions/{resourceId}"},
	{"PATCH", "/regions/{resourceId}", "/regions/{resourceId}"},
	{"DELETE", "/regions/{resourceId}", "/regions/{resourceId}"},

	{"GET", "/sites", "/sites"},
	{"POST", "/sites", "/sites"},
	{"GET", "/sites/{resourceId}", "/sites/{resourceId}"},
	{"PUT", "/sites/{resourceId}", "/sites/{resourceId}"},
	{"PATCH", "/sites/{resourceId}", "/sites/{resourceId}"},
	{"DELETE", "/sites/{resourceId}", "/sites/{resourceId}"},

	{"GET", "/locations", "/locations"},

	{"GET", "/hosts", "/compute/hosts"},
	{"POST", "/hosts", "/compute/hosts"},
	{"POST", "/hosts/register", "/compute/hosts/register"},
	{"GET", "/hosts/{resourceId}", "/compute/hosts/{resourceId}"},
	{"PUT", "/hosts/{resourceId}", "/compute/hosts/{resourceId}"},
	{"PATCH", "/hosts/{resourceId}", "/compute/hosts/{resourceId}"},
	{"DELETE", "/hosts/{resourceId}", "/compute/hosts/{resourceId}"},
	{"PUT", "/hosts/{resourceId}/invalidate", "/compute/hosts/{resourceId}/invalidate"},
	{"PATCH", "/hosts/{resourceId}/onboard", "/compute/hosts/{resourceId}/onboard"},
	{"PATCH", "/hosts/{resourceId}/register", "/compute/hosts/{resourceId}/register"},
	{"GET", "/hosts_summary", "/compute/hosts_summary"},

	{"GET", "/instances", "/compute/instances"},
	{"POST", "/instances", "/compute/instances"},
	{"GET", "/instances/{resourceId}", "/compute/instances/{resourceId}"},
	{"PUT", "/instances/{resourceId}", "/compute/instances/{resourceId}"},
	{"PATCH", "/instances/{resourceId}", "/compute/instances/{resourceId}"},
	{"DELETE", "/instances/{resourceId}", "/compute/instances/{resourceId}"},
	{"PUT", "/instances/{resourceId}/invalidate", "/compute/instances/{resourceId}/invalidate"},

	{"GET", "/operating_systems", "/compute/operating_systems"},
	{"POST", "/operating_systems", "/compute/operating_systems"},
	{"GET", "/operating_systems/{resourceId}", "/compute/operating_systems/{resourceId}"},
	{"PUT", "/operating_systems/{resourceId}", "/compute/operating_systems/{resourceId}"},
	{"PATCH", "/operating_systems/{resourceId}", "/compute/operating_systems/{resourceId}"},
	{"DELETE", "/operating_systems/{resourceId}", "/compute/operating_systems/{resourceId}"},

	{"GET", "/providers", "/providers"},
	{"POST", "/providers", "/providers"},
	{"GET", "/providers/{resourceId}", "/providers/{resourceId}"},
	{"DELETE", "/providers/{resourceId}", "/providers/{resourceId}"},

	{"GET", "/schedules", "/schedules"},
	{"GET", "/schedules/single", "/schedules/single"},
	{"POST", "/schedules/single", "/schedules/single"},
	{"GET", "/schedules/single/{resourceId}", "/schedules/single/{resourceId}"},
	{"PUT", "/schedules/single/{resourceId}", "/schedules/single/{resourceId}"},
	{"PATCH", "/schedules/single/{resourceId}", "/schedules/single/{resourceId}"},
	{"DELETE", "/schedules/single/{resourceId}", "/schedules/single/{resourceId}"},
	{"GET", "/schedules/repeated", "/schedules/repeated"},
	{"POST", "/schedules/repeated", "/schedules/repeated"},
	{"GET", "/schedules/repeated/{resourceId}", "/schedules/repeated/{resourceId}"},
	{"PUT", "/schedules/repeated/{resourceId}", "/schedules/repeated/{resourceId}"},
	{"PATCH", "/schedules/repeated/{resourceId}", "/schedules/repeated/{resourceId}"},
	{"DELETE", "/schedules/repeated/{resourceId}", "/schedules/repeated/{resourceId}"},

	{"GET", "/localAccounts", "/localAccounts"},
	{"POST", "/localAccounts", "/localAccounts"},
	{"GET", "/localAccounts/{resourceId}", "/localAccounts/{resourceId}"},
	{"DELETE", "/localAccounts/{resourceId}", "/localAccounts/{resourceId}"},

	{"GET", "/customConfigs", "/customConfigs"},
	{"POST", "/customConfigs", "/customConfigs"},
	{"GET", "/customConfigs/{resourceId}", "/customConfigs/{resourceId}"},
	{"DELETE", "/customConfigs/{resourceId}", "/customConfigs/{resourceId}"},

	{"GET", "/telemetry/groups/logs", "/telemetry/groups/logs"},
	{"POST", "/telemetry/groups/logs", "/telemetry/groups/logs"},
	{"GET", "/telemetry/groups/logs/{resourceId}", "/telemetry/groups/logs/{resourceId}"},
	{"DELETE", "/telemetry/groups/logs/{resourceId}", "/telemetry/groups/logs/{resourceId}"},
	{"GET", "/telemetry/groups/metrics", "/telemetry/groups/metrics"},
	{"POST", "/telemetry/groups/metrics", "/telemetry/groups/metrics"},
	{"GET", "/telemetry/groups/metrics/{resourceId}", "/telemetry/groups/metrics/{resourceId}"},
	{"DELETE", "/telemetry/groups/metrics/{resourceId}", "/telemetry/groups/metrics/{resourceId}"},
	{"GET", "/telemetry/profiles/logs", "/telemetry/profiles/logs"},
	{"POST", "/telemetry/profiles/logs", "/telemetry/profiles/logs"},
	{"GET", "/telemetry/profiles/logs/{resourceId}", "/telemetry/profiles/logs/{resourceId}"},
	{"PUT", "/telemetry/profiles/logs/{resourceId}", "/telemetry/profiles/logs/{resourceId}"},
	{"PATCH", "/telemetry/profiles/logs/{resourceId}", "/telemetry/profiles/logs/{resourceId}"},
	{"DELETE", "/telemetry/profiles/logs/{resourceId}", "/telemetry/profiles/logs/{resourceId}"},
	{"GET", "/telemetry/profiles/metrics", "/telemetry/profiles/metrics"},
	{"POST", "/telemetry/profiles/metrics", "/telemetry/profiles/metrics"},
	{"GET", "/telemetry/profiles/metrics/{resourceId}", "/telemetry/profiles/metrics/{resourceId}"},
	{"PUT", "/telemetry/profiles/metrics/{resourceId}", "/telemetry/profiles/metrics/{resourceId}"},
	{"PATCH", "/telemetry/profiles/metrics/{resourceId}", "/telemetry/profiles/metrics/{resourceId}"},
	{"DELETE", "/telemetry/profiles/metrics/{resourceId}", "/telemetry/profiles/metrics/{resourceId}"},

	{"GET", "/os_update_policy", "/os_update_policy"},
	{"POST", "/os_update_policy", "/os_update_policy"},
	{"GET", "/os_update_policy/{resourceId}", "/os_update_policy/{resourceId}"},
	{"DELETE", "/os_update_policy/{resourceId}", "/os_update_policy/{resourceId}"},
	{"GET", "/os_update_run", "/os_update_run"},
	{"GET", "/os_update_run/{resourceId}", "/os_update_run/{resourceId}"},
	{"DELETE", "/os_update_run/{resourceId}", "/os_update_run/{resourceId}"},

	// The workloads' twins are served once the workloads module is; until
	// then these answer what an unknown path answers.
	{"GET", "/workloads", "/compute/workloads"},
	{"POST", "/workloads", "/compute/workloads"},
	{"GET", "/workloads/{resourceId}", "/compute/workloads/{resourceId}"},
	{"PUT", "/workloads/{resourceId}", "/compute/workloads/{resourceId}"},
	{"PATCH", "/workloads/{resourceId}", "/compute/workloads/{resourceId}"},
	{"DELETE", "/workloads/{resourceId}", "/compute/workloads/{resourceId}"},
	{"GET", "/workload_members", "/workload_members"},
	{"POST", "/workload_members", "/workload_members"},
	{"GET", "/workload_members/{resourceId}", "/workload_members/{resourceId}"},
	{"DELETE", "/workload_members/{resourceId}", "/workload_members/{resourceId}"},
}
