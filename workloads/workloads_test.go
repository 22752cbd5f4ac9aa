package workloads_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/exporter"
	"github.com/eimhq/eim/inventory"
	workloadsv1 "github.com/eimhq/eim/proto/eim/workloads/v1"
	"github.com/eimhq/eim/workloads"
)

// camera is a workload selecting line=1 devices, with a config map, a
// secret and registry credentials.
func camera(image string) map[string]any {
	return map[string]any{
		"name": "camera",
		"spec": map[string]any{
			"deviceSelector": map[string]any{"matchLabels": map[string]string{"line": "1"},
				"matchExpressions": []map[string]any{{"key": "eim.io/arch", "operator": "In", "values": []string{"amd64", "arm64"}}}},
			"pod": map[string]any{"spec": map[string]any{
				"restartPolicy": "Always",
				"containers": []map[string]any{{
					"name": "reader", "image": image, "args": []string{"--fps", "10"},
					"env": []map[string]any{
						{"name": "MODE", "value": "fast"},
						{"name": "DB_PASSWORD", "valueFrom": map[string]any{"secretKeyRef": map[string]string{"name": "db", "key": "password"}}},
					},
					"ports":        []map[string]any{{"containerPort": 8080, "hostPort": 18080}},
					"volumeMounts": []map[string]any{{"name": "conf", "mountPath": "/etc/reader"}},
					"resources":    map[string]any{"limits": map[string]string{"cpu": "500m", "memory": "128Mi"}},
				}},
				"volumes": []map[string]any{{"name": "conf", "configMap": map[string]string{"name": "reader-conf"}}},
			}},
			"configmaps":      []map[string]any{{"name": "reader-conf", "data": map[string]string{"reader.conf": "fps=10\n"}}},
			"secrets":         []map[string]any{{"name": "db", "items": []map[string]string{{"key": "password", "value": "s3cret"}}}},
			"imageRegistries": map[string]any{"auths": []map[string]string{{"registry": "registry.example:5000", "username": "pull", "password": "reg-pass"}}},
			"data":            map[string]any{"egress": []map[string]any{{"source": "frames", "target": "frames"}}},
		},
	}
}

func spec(w map[string]any) map[string]any { return w["spec"].(map[string]any) }

func container(w map[string]any) map[string]any {
	return spec(w)["pod"].(map[string]any)["spec"].(map[string]any)["containers"].([]map[string]any)[0]
}

// TestAPI drives the edge workloads' API through its handlers on a real
// store: create (with a warning for an unpinned image), bad input refused
// with the field named and nothing stored, secrets never answered, a
// replace making a revision only when the spec changed (a left-out secret
// value keeping the stored one), lists, revisions, delete.
func TestAPI(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		p := e.proj.Name
		// Bad input: each a 400 naming the field.
		for _, tc := range []struct {
			name, want string
			edit       func(w map[string]any)
		}{
			{"unknown field", "colour", func(w map[string]any) { spec(w)["colour"] = "red" }},
			{"unknown container field", "imagePullSecret", func(w map[string]any) { container(w)["imagePullSecret"] = "x" }},
			{"bad name", "name", func(w map[string]any) { w["name"] = "Camera_1" }},
			{"no selector", "deviceSelector", func(w map[string]any) { delete(spec(w), "deviceSelector") }},
			{"empty selector", "deviceSelector", func(w map[string]any) { spec(w)["deviceSelector"] = map[string]any{} }},
			{"bad operator", "deviceSelector.matchExpressions[0].operator", func(w map[string]any) {
				spec(w)["deviceSelector"] = map[string]any{"matchExpressions": []map[string]any{{"key": "a", "operator": "Has"}}}
			}},
			{"In without values", "deviceSelector.matchExpressions[0].values", func(w map[string]any) {
				spec(w)["deviceSelector"] = map[string]any{"matchExpressions": []map[string]any{{"key": "a", "operator": "In"}}}
			}},
			{"selector and device", "device", func(w map[string]any) { spec(w)["device"] = "host-12345678" }},
			{"privileged", "pod.spec.containers[0].securityContext.privileged", func(w map[string]any) {
				container(w)["securityContext"] = map[string]any{"privileged": true}
			}},
			{"host network", "pod.spec.hostNetwork", func(w map[string]any) { spec(w)["pod"].(map[string]any)["spec"].(map[string]any)["hostNetwork"] = true }},
			{"secret in plain env", "pod.spec.containers[0].env[0].value", func(w map[string]any) {
				container(w)["env"] = []map[string]any{{"name": "API_TOKEN", "value": "abc"}}
			}},
			{"unknown secret", "pod.spec.containers[0].env[1].valueFrom.secretKeyRef", func(w map[string]any) { spec(w)["secrets"] = []any{} }},
			{"unknown volume", "pod.spec.containers[0].volumeMounts[0].name", func(w map[string]any) {
				container(w)["volumeMounts"] = []map[string]any{{"name": "nope", "mountPath": "/x"}}
			}},
			{"bad quantity", "pod.spec.containers[0].resources.limits.cpu", func(w map[string]any) {
				container(w)["resources"] = map[string]any{"limits": map[string]string{"cpu": "lots"}}
			}},
			{"escaping data path", "data.egress[0].source", func(w map[string]any) {
				spec(w)["data"] = map[string]any{"egress": []map[string]any{{"source": "../etc", "target": "x"}}}
			}},
			{"no password", "imageRegistries.auths[0].password", func(w map[string]any) {
				spec(w)["imageRegistries"] = map[string]any{"auths": []map[string]string{{"registry": "r.example", "username": "u"}}}
			}},
		} {
			w := camera("registry.example:5000/cam:1.0")
			tc.edit(w)
			r := e.want(e.call(p, "POST", "", w), 400, tc.name)
			if !strings.Contains(string(r.body), tc.want) {
				t.Fatalf("%s: got %s, want the field %s named", tc.name, r.body, tc.want)
			}
		}
		var list struct {
			EdgeWorkloads []workloads.View `json:"edgeWorkloads"`
			TotalElements int              `json:"totalElements"`
		}
		e.want(e.call(p, "GET", "", nil), 200, "list").decode(t, &list)
		if list.TotalElements != 0 {
			t.Fatalf("after refused writes: %d workloads stored, want none", list.TotalElements)
		}

		// An image without a tag: stored, with a warning.
		var v workloads.View
		r := e.want(e.call(p, "POST", "", camera("registry.example:5000/cam")), 201, "create")
		r.decode(t, &v)
		if v.Revision != 1 || len(v.Warnings) != 1 || !strings.Contains(v.Warnings[0], "pod.spec.containers[0].image") ||
			!strings.HasPrefix(r.header.Get("Warning"), "299 - ") {
			t.Fatalf("create: got revision %d warnings %q header %q, want 1 and the image warned of", v.Revision, v.Warnings, r.header.Get("Warning"))
		}
		if strings.Contains(string(r.body), "s3cret") || strings.Contains(string(r.body), "reg-pass") {
			t.Fatalf("the answer shows a secret: %s", r.body)
		}
		e.want(e.call(p, "POST", "", camera("registry.example:5000/cam:1.0")), 409, "create again")
		r = e.want(e.call(p, "GET", "/camera", nil), 200, "get")
		if strings.Contains(string(r.body), "s3cret") || strings.Contains(string(r.body), "reg-pass") || strings.Contains(string(r.body), "sealed") {
			t.Fatalf("get shows a secret: %s", r.body)
		}

		// Replace: the same spec (secret values left out) is no revision;
		// a changed one is.
		same := camera("registry.example:5000/cam")
		spec(same)["secrets"] = []map[string]any{{"name": "db", "items": []map[string]string{{"key": "password"}}}}
		spec(same)["imageRegistries"] = map[string]any{"auths": []map[string]string{{"registry": "registry.example:5000", "username": "pull"}}}
		e.want(e.call(p, "PUT", "/camera", same), 200, "replace unchanged").decode(t, &v)
		if v.Revision != 1 {
			t.Fatalf("an unchanged replace: revision %d, want 1", v.Revision)
		}
		changed := camera("registry.example:5000/cam:2.0")
		spec(changed)["secrets"] = spec(same)["secrets"]
		spec(changed)["imageRegistries"] = spec(same)["imageRegistries"]
		r = e.want(e.call(p, "PUT", "/camera", changed), 200, "replace")
		v = workloads.View{}
		r.decode(t, &v)
		if v.Revision != 2 || len(v.Warnings) != 0 {
			t.Fatalf("a changed replace: revision %d warnings %q, want 2 and none", v.Revision, v.Warnings)
		}
		bad := camera("x:1")
		container(bad)["securityContext"] = map[string]any{"privileged": true}
		e.want(e.call(p, "PUT", "/camera", bad), 400, "replace with a privileged container")
		other := camera("x:1")
		other["name"] = "other"
		e.want(e.call(p, "PUT", "/camera", other), 400, "replace under another name")
		missing := camera("x:1")
		delete(missing, "name")
		e.want(e.call(p, "PUT", "/nope", missing), 404, "replace a missing workload")

		var revs struct {
			Revisions []struct {
				Revision int64 `json:"revision"`
			} `json:"revisions"`
		}
		e.want(e.call(p, "GET", "/camera/revisions", nil), 200, "revisions").decode(t, &revs)
		if len(revs.Revisions) != 2 || revs.Revisions[1].Revision != 2 {
			t.Fatalf("revisions: got %+v, want 1 and 2", revs.Revisions)
		}

		// The project's setting admits privileged containers.
		allow := true
		if _, _, err := e.inv.UpdateProjectSettings(e.ctx, p, inventory.SettingsChange{EdgeWorkloadsAllowPrivileged: &allow}); err != nil {
			t.Fatal(err)
		}
		priv := camera("reg/tool:1")
		priv["name"] = "tool"
		container(priv)["securityContext"] = map[string]any{"privileged": true}
		spec(priv)["pod"].(map[string]any)["spec"].(map[string]any)["hostNetwork"] = true
		e.want(e.call(p, "POST", "", priv), 201, "a privileged workload where the project allows it")

		// Lists: pages, filter.
		e.want(e.call(p, "GET", "?pageSize=1", nil), 200, "page").decode(t, &list)
		if list.TotalElements != 2 || len(list.EdgeWorkloads) != 1 || list.EdgeWorkloads[0].Name != "camera" {
			t.Fatalf("page: got %+v", list)
		}
		e.want(e.call(p, "GET", `?filter=name%3D%22tool%22`, nil), 200, "filter").decode(t, &list)
		if list.TotalElements != 1 || list.EdgeWorkloads[0].Name != "tool" {
			t.Fatalf("filter: got %+v", list)
		}
		e.want(e.call(p, "GET", "?filter=revision%3D1", nil), 400, "filter on another field")
		e.want(e.call(p, "GET", "?pageSize=0", nil), 400, "pageSize 0")

		// Another project sees none of it.
		e.project("other")
		e.want(e.call("other", "GET", "/camera", nil), 404, "another project's workload")

		e.want(e.call(p, "DELETE", "/tool", nil), 200, "delete")
		e.want(e.call(p, "DELETE", "/tool", nil), 404, "delete again")
	})
}

// recorder is an eim.UploadGranter that grants every change at a URL
// naming the prefix, and records the prefixes asked for.
type recorder struct {
	mu       sync.Mutex
	prefixes []string
}

func (r *recorder) GrantUploads(_ context.Context, project, prefix string, changes []eim.FileChange) ([]eim.UploadGrant, time.Time, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.prefixes = append(r.prefixes, project+":"+prefix)
	var out []eim.UploadGrant
	for _, c := range changes {
		m := "PUT"
		if !c.Present {
			m = "DELETE"
		}
		out = append(out, eim.UploadGrant{Path: c.Path, Method: m, URL: "https://s3.example/bucket/" + prefix + c.Path, Headers: map[string]string{"x-amz-date": "now"}})
	}
	return out, time.Unix(2_000_000_000, 0), nil
}

// GrantDownloads records the prefixes asked for and answers one file per
// prefix, named by its order.
func (r *recorder) GrantDownloads(_ context.Context, project string, prefixes []string) ([]eim.DownloadGrant, bool, time.Time, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []eim.DownloadGrant
	for i, p := range prefixes {
		r.prefixes = append(r.prefixes, project+":"+p)
		out = append(out, eim.DownloadGrant{Path: strconv.Itoa(i) + ".bin", Size: 3, ETag: "e", Modified: time.Unix(1_900_000_000, 0),
			URL: "https://s3.example/bucket/" + p + strconv.Itoa(i) + ".bin"})
	}
	return out, true, time.Unix(2_000_000_000, 0), nil
}

// TestDevices drives WorkloadService through its Connect client with real
// node tokens: a device whose labels match gets the workload (rendered,
// secrets opened), its version answers "unchanged", an update gives a new
// version and revision, a device losing its label loses the workload,
// status is stored and aggregated, log tails and uploads go through.
func TestDevices(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		p := e.proj.Name
		d1 := e.device(p, "", "x86_64", "line", "1")
		d2 := e.device(p, "", "aarch64", "line", "2")
		d3 := e.device(p, "", "riscv64", "line", "1") // no architecture the selector takes
		e.want(e.call(p, "POST", "", camera("registry.example:5000/cam:1.0")), 201, "create")
		e.reconcile(p)

		v1 := ""
		eventually(t, "d1's version in the heartbeats' cache", func() bool { v1 = e.svc.Version(e.ctx, p, d1.id); return v1 != "" })
		if v := e.svc.Version(e.ctx, p, d2.id); v != "" {
			t.Fatalf("d2 (line 2) has version %q, want none", v)
		}
		if v := e.svc.Version(e.ctx, p, d3.id); v != "" {
			t.Fatalf("d3 (riscv64) has version %q, want none", v)
		}
		got := e.get(d1, "")
		if got.Version != v1 || got.Unchanged || len(got.Workloads) != 1 {
			t.Fatalf("d1's set: version %q unchanged %v %d workloads; want %q and camera", got.Version, got.Unchanged, len(got.Workloads), v1)
		}
		w := got.Workloads[0]
		pod := string(w.PodYaml)
		for _, want := range []string{"kind: Pod", "name: camera", "eim.io/edge-workload: camera", `eim.io/revision: "1"`, "image: registry.example:5000/cam:1.0",
			"containerPort: 8080", "secretKeyRef:", "mountPath: /export", workloads.DeviceDataRoot + "/camera/data"} {
			if !strings.Contains(pod, want) {
				t.Fatalf("pod YAML lacks %q:\n%s", want, pod)
			}
		}
		if w.Revision != 1 || len(w.ConfigMaps) != 1 || !strings.Contains(string(w.ConfigMaps[0]), "reader.conf") {
			t.Fatalf("rendered: revision %d, config maps %q", w.Revision, w.ConfigMaps)
		}
		if len(w.Secrets) != 1 || string(w.Secrets[0].Items[0].Value) != "s3cret" || len(w.RegistryAuth) != 1 || w.RegistryAuth[0].Password != "reg-pass" {
			t.Fatalf("secrets and registry auth not opened for the device: %v %v", w.Secrets, w.RegistryAuth)
		}
		if len(w.DataPaths) != 1 || w.DataPaths[0].Direction != workloadsv1.DataPath_DIRECTION_EGRESS || w.DataPaths[0].Source != workloads.DeviceDataRoot+"/camera/data/frames" {
			t.Fatalf("data paths: %v", w.DataPaths)
		}
		if again := e.get(d1, v1); !again.Unchanged || len(again.Workloads) != 0 || again.Version != v1 {
			t.Fatalf("the same version again: got %+v, want unchanged", again)
		}
		if none := e.get(d2, ""); len(none.Workloads) != 0 || none.Version != "" {
			t.Fatalf("d2's set: %+v, want empty", none)
		}

		// Status, aggregated.
		report := func(d *device, rev int64, phase workloadsv1.WorkloadStatus_Phase) {
			t.Helper()
			_, err := d.client.ReportStatus(e.ctx, connect.NewRequest(&workloadsv1.ReportStatusRequest{Version: v1, Workloads: []*workloadsv1.WorkloadStatus{{
				Name: "camera", Revision: rev, Phase: phase, TransitionTime: time.Now().Unix(),
				Containers: []*workloadsv1.ContainerStatus{{Name: "reader", State: "running", Restarts: 2}}}}}))
			if err != nil {
				t.Fatal(err)
			}
		}
		report(d1, 1, workloadsv1.WorkloadStatus_PHASE_RUNNING)
		// The exporter's series, a projection of the same tables.
		rec := httptest.NewRecorder()
		exporter.New(exporter.Options{Store: e.store}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		if want := `eim_workload_devices{project="acme",revision="1",status="running",workload="camera"} 1`; !strings.Contains(rec.Body.String(), want) {
			t.Fatalf("/metrics lacks %s:\n%s", want, rec.Body.String())
		}
		var st workloads.StatusView
		e.want(e.call(p, "GET", "/camera/status", nil), 200, "status").decode(t, &st)
		if st.Devices.Total != 1 || st.Devices.Running != 1 || len(st.ByRevision) != 1 || st.ByRevision[0].Revision != 1 {
			t.Fatalf("status: %+v, want one device running revision 1", st)
		}
		_, err := d1.client.ReportStatus(e.ctx, connect.NewRequest(&workloadsv1.ReportStatusRequest{Workloads: []*workloadsv1.WorkloadStatus{{Name: "Bad Name"}}}))
		if connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Fatalf("a bad report: got %v, want InvalidArgument", err)
		}

		// An update: a new revision, a new version; the device updating
		// until it reports the new revision.
		e.want(e.call(p, "PUT", "/camera", camera("registry.example:5000/cam:2.0")), 200, "update")
		e.reconcile(p)
		var v2 string
		eventually(t, "d1's new version", func() bool { v2 = e.svc.Version(e.ctx, p, d1.id); return v2 != v1 })
		if n1, n2 := atoi(t, v1), atoi(t, v2); n2 <= n1 {
			t.Fatalf("version went from %d to %d, want forward", n1, n2)
		}
		got = e.get(d1, v1)
		if got.Unchanged || len(got.Workloads) != 1 || got.Workloads[0].Revision != 2 || !strings.Contains(string(got.Workloads[0].PodYaml), "cam:2.0") {
			t.Fatalf("after the update: %+v, want revision 2", got)
		}
		e.want(e.call(p, "GET", "/camera/status", nil), 200, "status").decode(t, &st)
		if st.Revision != 2 || st.Devices.Updating != 1 {
			t.Fatalf("status during the update: %+v, want one device updating", st)
		}
		report(d1, 2, workloadsv1.WorkloadStatus_PHASE_DEGRADED)
		e.want(e.call(p, "GET", "/camera/status", nil), 200, "status").decode(t, &st)
		if st.Devices.Degraded != 1 || st.ByRevision[0].Revision != 2 {
			t.Fatalf("status after the update: %+v, want one device degraded at 2", st)
		}
		var devs struct {
			Devices []workloads.DeviceView `json:"devices"`
		}
		e.want(e.call(p, "GET", "/camera/devices", nil), 200, "devices").decode(t, &devs)
		if len(devs.Devices) != 1 || devs.Devices[0].HostID != d1.id || devs.Devices[0].Containers[0].Restarts != 2 || devs.Devices[0].TargetRevision != 2 {
			t.Fatalf("devices: %+v", devs.Devices)
		}

		// Log tail: the request moves the version; the device answers.
		type logResult struct{ r resp }
		done := make(chan logResult, 1)
		go func() {
			r := e.call(p, "GET", "/camera/logs?host="+d1.id+"&container=reader&tail=5&wait=10", nil)
			done <- logResult{r: r}
		}()
		var lr *workloadsv1.LogRequest
		eventually(t, "the log request in d1's set", func() bool {
			got := e.get(d1, v2)
			if len(got.LogRequests) == 1 {
				lr = got.LogRequests[0]
			}
			return lr != nil
		})
		if lr.Workload != "camera" || lr.Container != "reader" || lr.TailLines != 5 {
			t.Fatalf("log request: %+v", lr)
		}
		if _, err := d1.client.ReportLogs(e.ctx, connect.NewRequest(&workloadsv1.ReportLogsRequest{Id: lr.Id, Logs: []*workloadsv1.ContainerLog{{Container: "reader", Text: []byte("frame 1\n")}}})); err != nil {
			t.Fatal(err)
		}
		res := <-done
		var lv workloads.LogView
		e.want(res.r, 200, "logs").decode(t, &lv)
		if lv.State != "answered" || len(lv.Logs) != 1 || lv.Logs[0].Text != "frame 1\n" {
			t.Fatalf("logs: %+v", lv)
		}
		e.want(e.call(p, "GET", "/camera/logs?host="+d2.id, nil), 400, "logs of a device that does not run it")

		// Uploads: no object storage here.
		_, err = d1.client.GrantUploads(e.ctx, connect.NewRequest(&workloadsv1.GrantUploadsRequest{Workload: "camera", Target: "frames",
			Changes: []*workloadsv1.FileChange{{Path: "a.jpg", Present: true, Size: 3}}}))
		if connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), "no object storage configured for project "+p) {
			t.Fatalf("grant without storage: got %v, want FailedPrecondition", err)
		}
		if _, err := d1.client.ReportUploads(e.ctx, connect.NewRequest(&workloadsv1.ReportUploadsRequest{Workload: "camera", Target: "frames", Done: []string{"a.jpg"},
			Failed: []*workloadsv1.UploadFailure{{Path: "b.jpg", Reason: "403"}}})); err != nil {
			t.Fatal(err)
		}
		e.want(e.call(p, "GET", "/camera/devices", nil), 200, "devices").decode(t, &devs)
		if devs.Devices[0].LastDataUpload.IsZero() || len(devs.Devices[0].UploadErrors) != 1 {
			t.Fatalf("uploads in the status: %+v", devs.Devices[0])
		}

		// The label goes: so does the workload, with a newer version.
		vlog := e.get(d1, "").Version
		e.setMetadata(p, d1.id, "line", "3")
		e.reconcile(p)
		var v3 string
		eventually(t, "d1's version after its label changed", func() bool {
			v3 = e.svc.Version(e.ctx, p, d1.id)
			return v3 != "" && atoi(t, v3) > atoi(t, vlog)
		})
		got = e.get(d1, vlog)
		if got.Unchanged || len(got.Workloads) != 0 || got.Version != v3 {
			t.Fatalf("after the label went: %+v, want an empty set at %s", got, v3)
		}
		// d1 reports the removal; its status shows "removing" until it
		// reports no pod.
		report(d1, 2, workloadsv1.WorkloadStatus_PHASE_REMOVING)
		e.want(e.call(p, "GET", "/camera/status", nil), 200, "status").decode(t, &st)
		if st.Devices.Removing != 1 {
			t.Fatalf("status while d1 removes it: %+v", st)
		}
		if _, err := d1.client.ReportStatus(e.ctx, connect.NewRequest(&workloadsv1.ReportStatusRequest{Version: v3})); err != nil {
			t.Fatal(err)
		}
		e.want(e.call(p, "GET", "/camera/status", nil), 200, "status").decode(t, &st)
		if st.Devices.Total != 0 {
			t.Fatalf("status after d1 removed it: %+v, want no device", st)
		}

		// A device never reporting (Unknown) loses a deleted workload too.
		e.setMetadata(p, d2.id, "line", "1")
		e.reconcile(p)
		eventually(t, "d2 selected", func() bool { return e.svc.Version(e.ctx, p, d2.id) != "" })
		vd2 := e.svc.Version(e.ctx, p, d2.id)
		e.want(e.call(p, "DELETE", "/camera", nil), 200, "delete")
		eventually(t, "d2's version after the delete", func() bool { return e.svc.Version(e.ctx, p, d2.id) != vd2 })
		if got := e.get(d2, vd2); len(got.Workloads) != 0 || got.Unchanged {
			t.Fatalf("d2 after the delete: %+v, want an empty set", got)
		}
	})
}

// TestUploadGrants: a device's grants are asked of the project's object
// storage under its own prefix <host>/<workload>/<target>/, for an egress
// data path of a workload it runs only.
func TestUploadGrants(t *testing.T) {
	rec := &recorder{}
	e := newEnv(t, t.TempDir()+"/eim.db", rec)
	p := e.proj.Name
	d := e.device(p, "", "amd64", "line", "1")
	e.want(e.call(p, "POST", "", camera("r.example/cam:1")), 201, "create")
	e.reconcile(p)
	res, err := d.client.GrantUploads(e.ctx, connect.NewRequest(&workloadsv1.GrantUploadsRequest{Workload: "camera", Target: "frames",
		Changes: []*workloadsv1.FileChange{{Path: "2026/a.jpg", Present: true, Size: 3, Sha256: strings.Repeat("0", 64)}, {Path: "old.jpg"}}}))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Msg.Grants) != 2 || res.Msg.Grants[1].Method != "DELETE" || res.Msg.ExpiresTime != 2_000_000_000 {
		t.Fatalf("grants: %+v", res.Msg)
	}
	if want := p + ":" + d.id + "/camera/frames/"; len(rec.prefixes) != 1 || rec.prefixes[0] != want {
		t.Fatalf("prefixes asked: %q, want %q", rec.prefixes, want)
	}
	for _, tc := range []struct {
		name     string
		workload string
		target   string
		path     string
		code     connect.Code
	}{
		{"escaping path", "camera", "frames", "../x", connect.CodeInvalidArgument},
		{"absolute path", "camera", "frames", "/etc/passwd", connect.CodeInvalidArgument},
		{"not an egress target", "camera", "other", "a", connect.CodeInvalidArgument},
		{"a workload it does not run", "nope", "frames", "a", connect.CodeNotFound},
	} {
		_, err := d.client.GrantUploads(e.ctx, connect.NewRequest(&workloadsv1.GrantUploadsRequest{Workload: tc.workload, Target: tc.target,
			Changes: []*workloadsv1.FileChange{{Path: tc.path, Present: true}}}))
		var ce *connect.Error
		if !errors.As(err, &ce) || ce.Code() != tc.code {
			t.Fatalf("%s: got %v, want %v", tc.name, err, tc.code)
		}
	}
	if len(rec.prefixes) != 1 {
		t.Fatalf("refused requests reached the storage: %q", rec.prefixes)
	}
}

// TestDownloadGrants: a device's ingress listing is asked of the
// project's object storage for its own prefix, then the workload's
// shared one, for an ingress data path of a workload it runs only; its
// report is the device's lastDataDownload and download errors.
func TestDownloadGrants(t *testing.T) {
	rec := &recorder{}
	e := newEnv(t, t.TempDir()+"/eim.db", rec)
	p := e.proj.Name
	d := e.device(p, "", "amd64", "line", "1")
	w := camera("r.example/cam:1")
	w["spec"].(map[string]any)["data"] = map[string]any{"egress": []map[string]any{{"source": "frames", "target": "frames"}},
		"ingress": []map[string]any{{"source": "models", "target": "models/v1"}}}
	e.want(e.call(p, "POST", "", w), 201, "create")
	e.reconcile(p)
	res, err := d.client.ListDownloads(e.ctx, connect.NewRequest(&workloadsv1.ListDownloadsRequest{Workload: "camera", Target: "models/v1"}))
	if err != nil {
		t.Fatal(err)
	}
	if m := res.Msg; len(m.Files) != 2 || m.Files[0].Path != "0.bin" || m.Files[0].ModifiedTime != 1_900_000_000 || !m.Truncated || m.ExpiresTime != 2_000_000_000 {
		t.Fatalf("listing: %+v", m)
	}
	if want := []string{p + ":" + d.id + "/camera/models/v1/", p + ":_workloads/camera/models/v1/"}; !slices.Equal(rec.prefixes, want) {
		t.Fatalf("prefixes asked: %q, want %q", rec.prefixes, want)
	}
	for _, tc := range []struct {
		name     string
		workload string
		target   string
		code     connect.Code
	}{
		{"an egress target", "camera", "frames", connect.CodeInvalidArgument},
		{"not a target", "camera", "models", connect.CodeInvalidArgument},
		{"escaping", "camera", "models/v1/..", connect.CodeInvalidArgument},
		{"a workload it does not run", "nope", "models/v1", connect.CodeNotFound},
		{"a bad workload name", "../x", "models/v1", connect.CodeInvalidArgument},
	} {
		_, err := d.client.ListDownloads(e.ctx, connect.NewRequest(&workloadsv1.ListDownloadsRequest{Workload: tc.workload, Target: tc.target}))
		if connect.CodeOf(err) != tc.code {
			t.Fatalf("%s: got %v, want %v", tc.name, err, tc.code)
		}
	}
	if len(rec.prefixes) != 2 {
		t.Fatalf("refused requests reached the storage: %q", rec.prefixes)
	}
	if _, err := d.client.ReportDownloads(e.ctx, connect.NewRequest(&workloadsv1.ReportDownloadsRequest{Workload: "camera", Target: "models/v1",
		Done: []string{"0.bin"}, Failed: []*workloadsv1.UploadFailure{{Path: "1.bin", Reason: "GET: 403"}}})); err != nil {
		t.Fatal(err)
	}
	if _, err := d.client.ReportDownloads(e.ctx, connect.NewRequest(&workloadsv1.ReportDownloadsRequest{Workload: "camera", Target: "frames",
		Done: []string{"0.bin"}})); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("a download report of an egress target: got %v, want InvalidArgument", err)
	}
	var devs struct {
		Devices []eim.EdgeWorkloadDeviceView `json:"devices"`
	}
	e.want(e.call(p, "GET", "/camera/devices", nil), 200, "devices").decode(t, &devs)
	if len(devs.Devices) != 1 || devs.Devices[0].LastDataDownload.IsZero() || !slices.Equal(devs.Devices[0].DownloadErrors, []string{"models/v1/1.bin: GET: 403"}) ||
		!devs.Devices[0].LastDataUpload.IsZero() {
		t.Fatalf("downloads in the status: %+v", devs.Devices)
	}
}

func atoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("version %q: %v", s, err)
	}
	return n
}
