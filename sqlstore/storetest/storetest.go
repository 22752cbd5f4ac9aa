// Package storetest is the conformance suite of eim.Store: every
// implementation runs it (sqlstore on SQLite and on PostgreSQL).
package storetest

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eimhq/eim"
)

// Run runs the suite. open returns a new, empty, migrated store; it is
// called once per subtest and must arrange the store's closing (t.Cleanup).
func Run(t *testing.T, open func(t *testing.T) eim.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s eim.Store)
	}{
		{"CRUDEveryKind", testCRUD},
		{"RoundTripFieldTypes", testRoundTrip},
		{"UpdateMissing", testUpdateMissing},
		{"Uniqueness", testUniqueness},
		{"References", testReferences},
		{"CascadeSchedulesOfHost", testCascade},
		{"FailedStatementAbortsTx", testAbort},
		{"ReadOnlyView", testReadOnly},
		{"Tenancy", testTenancy},
		{"IDGeneration", testIDs},
		{"WhereConds", testWhere},
		{"ListPaging", testPaging},
		{"TotalsFollowWrites", testTotalsFollowWrites},
		{"GetMany", testGetMany},
		{"RereadInTx", testRereadInTx},
		{"RefsAcrossTx", testRefsAcrossTx},
		{"GroupedCreates", testGroupedCreates},
		{"NoLostUpdates", testNoLostUpdates},
		{"ConflictGivesUp", testConflictGivesUp},
		{"UpdateFields", testUpdateFields},
		{"UpdateFieldsIf", testUpdateFieldsIf},
		{"FieldWritesDoNotRace", testFieldWritesDoNotRace},
		{"StaleRowNotWritten", testStaleRowNotWritten},
		{"Filter", testFilter},
		{"Projects", testProjects},
		{"DeleteProject", testDeleteProject},
		{"FeedOrderAndResume", testFeed},
		{"FeedConcurrentWriters", testConcurrentFeed},
		{"WatchWakeUp", testWatchWakeUp},
		{"WatchEndsWithContext", testWatchCancel},
		{"FeedPositions", testFeedPositions},
		{"OnCommit", testOnCommit},
		{"ProjectSettings", testProjectSettings},
		{"HiddenStoredFields", testHiddenFields},
		{"WorkflowCascade", testWorkflowCascade},
		{"LastSeen", testLastSeen},
		{"HostBeats", testHostBeats},
		{"NodeReports", testNodeReports},
		{"DeviceClaims", testDeviceClaims},
		{"HostFacts", testHostFacts},
		{"Leases", testLeases},
		{"Members", testMembers},
		{"HardwareRoundTrip", testHardwareRoundTrip},
		{"Variants", testVariants},
		{"AnyConds", testAnyConds},
		{"TelemetryCascade", testTelemetryCascade},
		{"OSUpdateReferences", testOSUpdateReferences},
		{"OSUpdateRuns", testOSUpdateRuns},
		{"CountBy", testCountBy},
		{"MetadataPairs", testMetadataPairs},
		{"Workloads", testWorkloads},
		{"ConnectCredentials", testConnectCredentials},
		{"Tunnels", testTunnels},
		{"Audit", testAudit},
		{"AuditSeqPerProject", testAuditSeqPerProject},
		{"WebhookQueue", testWebhookQueue},
		{"TenantRecords", testTenantRecords},
		{"BMCs", testBMCs},
		{"RecoveryKeys", testRecoveryKeys},
		{"AttestationKeys", testAttestationKeys},
		{"EdgeWorkloads", testEdgeWorkloads},
		{"EdgeWorkloadDeleteRaces", testEdgeWorkloadDeleteRaces},
		{"EdgeDeviceStatusWanted", testEdgeDeviceStatusWanted},
		{"EdgeWorkloadRollouts", testEdgeWorkloadRollouts},
		{"ObjectStorage", testObjectStorage},
		{"PowerJobs", testPowerJobs},
		{"PowerJobLeases", testPowerJobLeases},
		{"PowerJobQueue", testPowerJobQueue},
		{"PowerJobRequests", testPowerJobRequests},
		{"EnrollmentLobby", testEnrollmentLobby},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.fn(t, open(t))
		})
	}
}

// ctx returns a context bounded for one test.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

var projectSeq atomic.Int64

// project creates a fresh project and returns its name.
func project(t *testing.T, s eim.Store) string {
	t.Helper()
	n := projectSeq.Add(1)
	name := fmt.Sprintf("p%d", n)
	if err := s.CreateProject(ctx(t), &eim.Project{Name: name, ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", n)}); err != nil {
		t.Fatalf("CreateProject(%s): %v", name, err)
	}
	return name
}

// wantCode fails unless err carries the code.
func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := eim.ErrorCode(err); got != code {
		t.Fatalf("error code: got %q (%v), want %q", got, err, code)
	}
}

func update(t *testing.T, s eim.Store, project string, fn func(eim.Tx) error) {
	t.Helper()
	if err := s.Update(ctx(t), project, fn); err != nil {
		t.Fatalf("Update: %v", err)
	}
}

func create(t *testing.T, s eim.Store, project string, r eim.Resource) eim.Resource {
	t.Helper()
	update(t, s, project, func(tx eim.Tx) error { return tx.Create(ctx(t), r) })
	return r
}

func get(t *testing.T, s eim.Store, project string, k eim.Kind, id string) (eim.Resource, error) {
	var r eim.Resource
	err := s.View(ctx(t), project, func(tx eim.Tx) error {
		var err error
		r, err = tx.Get(ctx(t), k, id)
		return err
	})
	return r, err
}

var seq atomic.Int64

// fill sets every stored field of r that the store does not own to a
// non-zero value unique to this call; references are created first in
// the project (a region's parent region too).
func fill(t *testing.T, s eim.Store, project string, r eim.Resource) {
	t.Helper()
	n := seq.Add(1)
	sch := eim.SchemaOf(r.ResourceKind())
	for _, f := range sch.Fields {
		if !f.Stored() {
			continue
		}
		switch f.Column {
		case "id", "project", "created_at", "updated_at":
			continue
		}
		v := f.Value(r)
		if f.Edge != nil {
			target := eim.NewResource(f.Edge.Kind)
			ref := create(t, s, project, target)
			v.SetString(ref.Base().ResourceID)
			continue
		}
		setValue(t, f, v, n)
	}
}

func setValue(t *testing.T, f *eim.Field, v reflect.Value, n int64) {
	t.Helper()
	if f.IsEnum() {
		vals := v.Interface().(eim.Enum).Values()
		v.SetString(vals[1+int(n)%(len(vals)-1)])
		return
	}
	if v.Type() == reflect.TypeFor[eim.Time]() {
		v.Set(reflect.ValueOf(eim.TimeFromUnixMilli(1_700_000_000_000 + n)))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("%s-%d ünï \"q\"", f.Name, n))
	case reflect.Int, reflect.Int32, reflect.Int64:
		v.SetInt(-1000 - n)
	case reflect.Uint32:
		v.SetUint(1<<31 + uint64(n))
	case reflect.Uint, reflect.Uint64:
		v.SetUint(1<<40 + uint64(n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Slice:
		switch v.Type() {
		case reflect.TypeFor[eim.Metadata]():
			v.Set(reflect.ValueOf(eim.Metadata{{Key: "k1", Value: fmt.Sprint(n)}, {Key: "b", Value: "x y"}}))
		case reflect.TypeFor[[]string]():
			v.Set(reflect.ValueOf([]string{fmt.Sprint("a", n), "b"}))
		case reflect.TypeFor[[]eim.WorkflowAction]():
			v.Set(reflect.ValueOf([]eim.WorkflowAction{{
				Name: "erase", Type: eim.ActionEraseDisk, Params: map[string]string{"device": fmt.Sprint("/dev/sd", n)},
				TimeoutSeconds: 560, State: eim.ActionFailed, Message: "ünï \"q\"", ExitCode: 3,
				StartedAt: eim.TimeFromUnixMilli(1_700_000_000_123 + n), FinishedAt: eim.TimeFromUnixMilli(1_700_000_001_000 + n),
			}, {Name: "reboot", Type: eim.ActionReboot, State: eim.ActionPending}}))
		case reflect.TypeFor[[]eim.WorkflowLogEntry]():
			v.Set(reflect.ValueOf([]eim.WorkflowLogEntry{
				{Seq: 1, Time: eim.TimeFromUnixMilli(1_700_000_000_000 + n), Attempt: 1, Action: -1, Message: "started"},
				{Seq: 2, Time: eim.TimeFromUnixMilli(1_700_000_000_500 + n), Attempt: 1, Action: 0, Name: "erase", State: eim.ActionRunning, Output: fmt.Sprint("line ", n, "\n\x00ü")},
			}))
		case reflect.TypeFor[eim.List[eim.HostStorage]]():
			v.Set(reflect.ValueOf(eim.List[eim.HostStorage]{{DeviceName: fmt.Sprint("sd", n), CapacityBytes: 1 << 40, Timestamps: sampleTimestamps(n)}}))
		case reflect.TypeFor[eim.List[eim.HostNic]]():
			v.Set(reflect.ValueOf(eim.List[eim.HostNic]{{DeviceName: fmt.Sprint("eth", n), Mtu: 9000,
				LinkState:   eim.NicLinkState{Type: eim.LinkStateDown, Timestamps: sampleTimestamps(n)},
				IPAddresses: eim.List[eim.IPAddress]{{ResourceID: "ipaddr-00000001", Address: "198.51.100.7/25", Status: eim.IPAddressStatusConfigurationError, StatusDetail: "duplicate"}},
				Timestamps:  sampleTimestamps(n)}}))
		case reflect.TypeFor[eim.List[eim.HostUsb]]():
			v.Set(reflect.ValueOf(eim.List[eim.HostUsb]{{IDVendor: "8087", Bus: 3, Addr: uint32(n % 100), Timestamps: sampleTimestamps(n)}}))
		case reflect.TypeFor[eim.List[eim.HostGpu]]():
			v.Set(reflect.ValueOf(eim.List[eim.HostGpu]{{PciID: "0000:03:00.0", Capabilities: eim.List[string]{"a", fmt.Sprint(n)}, Timestamps: sampleTimestamps(n)}}))
		default:
			t.Fatalf("storetest: no sample value for %s (%s): extend setValue", f.Name, v.Type())
		}
	default:
		t.Fatalf("storetest: no sample value for %s (%s): extend setValue", f.Name, v.Type())
	}
}

func sampleTimestamps(n int64) eim.Timestamps {
	return eim.Timestamps{CreatedAt: eim.TimeFromUnixMilli(1_700_000_000_000 + n), UpdatedAt: eim.TimeFromUnixMilli(1_700_000_002_000 + n)}
}

// stored returns a copy of r with only stored fields, for comparisons.
func stored(r eim.Resource) eim.Resource {
	sch := eim.SchemaOf(r.ResourceKind())
	out := sch.New()
	for _, f := range sch.Fields {
		if !f.Stored() {
			continue
		}
		v := f.Value(r)
		// nil and empty slices are the same stored value.
		if v.Kind() == reflect.Slice && v.Len() == 0 {
			continue
		}
		f.Value(out).Set(v)
	}
	return out
}

func sameStored(t *testing.T, got, want eim.Resource) {
	t.Helper()
	g, w := stored(got), stored(want)
	if !reflect.DeepEqual(g, w) {
		sch := eim.SchemaOf(want.ResourceKind())
		for _, f := range sch.Fields {
			if f.Stored() && !reflect.DeepEqual(f.Value(g).Interface(), f.Value(w).Interface()) {
				t.Errorf("%s.%s: got %#v, want %#v", want.ResourceKind(), f.Name, f.Value(g).Interface(), f.Value(w).Interface())
			}
		}
		t.FailNow()
	}
}

func mustContain(t *testing.T, err error, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if err == nil || !strings.Contains(err.Error(), p) {
			t.Fatalf("error %v: want it to mention %q", err, p)
		}
	}
}
