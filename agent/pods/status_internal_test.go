package pods

import "testing"

func TestDerive(t *testing.T) {
	c := func(state string, code int) Container { return Container{State: state, ExitCode: code} }
	for _, tc := range []struct {
		name string
		pod  string
		ctrs []Container
		want Status
	}{
		{"all running", "Running", []Container{c("running", 0), c("running", 0)}, Running},
		{"one exited, infra running", "Degraded", []Container{c("running", 0), c("exited", 3)}, Degraded},
		{"only container exited, infra running", "Degraded", []Container{c("exited", 3)}, Exited},
		{"all exited, exit policy stopped the infra", "Exited", []Container{c("exited", 0), c("exited", 3)}, Exited},
		{"pod stop", "Exited", []Container{c("exited", 137), c("exited", 143)}, Stopped},
		{"one killed, one failed", "Exited", []Container{c("exited", 137), c("exited", 1)}, Exited},
		{"podman Stopped", "Stopped", []Container{c("stopped", 0)}, Stopped},
		{"ended on its own, cleanup not run yet", "Degraded", []Container{c("running", 0), c("stopped", 3)}, Degraded},
		{"only container ended, cleanup not run yet", "Degraded", []Container{c("stopped", 3)}, Exited},
		{"created", "Created", []Container{c("created", 0)}, Deploying},
		{"one still created", "Degraded", []Container{c("running", 0), c("created", 0)}, Deploying},
		{"paused", "Paused", []Container{c("paused", 0)}, Degraded},
		{"podman Error", "Error", []Container{c("running", 0)}, Error},
		{"container error", "Degraded", []Container{c("running", 0), {State: "exited", Error: "executable not found"}}, Error},
		{"dead container", "Degraded", []Container{c("dead", 0)}, Error},
		{"no containers", "Running", nil, Error},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := derive(tc.pod, tc.ctrs); got != tc.want {
				t.Errorf("derive(%s, %+v): got %s, want %s", tc.pod, tc.ctrs, got, tc.want)
			}
		})
	}
}
