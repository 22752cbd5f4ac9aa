package hardware

import (
	"encoding/json"
	"strings"
	"testing"

	ghwcpu "github.com/jaypipes/ghw/pkg/cpu"

	"github.com/eimhq/eim/hwlimit"
)

func TestCPUList(t *testing.T) {
	for _, tc := range []struct {
		in   []int
		want string
	}{
		{nil, ""},
		{[]int{0}, "0"},
		{[]int{0, 2}, "0,2"},
		{[]int{3, 1, 2, 2, 7, 9, 8}, "1-3,7-9"},
		{[]int{0, 1, 2, 3, 64, 65, 127}, "0-3,64-65,127"},
	} {
		if got := cpulist(tc.in); got != tc.want {
			t.Errorf("cpulist(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// machine has the given sockets of cores of 2 threads, numbered as Linux
// does: first threads of every core, then the siblings.
func machine(sockets, cores int) []*ghwcpu.Processor {
	n := sockets * cores
	var procs []*ghwcpu.Processor
	for s := range sockets {
		p := &ghwcpu.Processor{ID: s}
		for c := range cores {
			lp := s*cores + c
			p.Cores = append(p.Cores, &ghwcpu.ProcessorCore{ID: c, LogicalProcessors: []int{lp, lp + n}})
		}
		procs = append(procs, p)
	}
	return procs
}

// A document that does not fit drops details, and is never cut.
func TestTopologyJSONFits(t *testing.T) {
	for _, tc := range []struct {
		sockets, cores int
		want           string // a part of the document
	}{
		{1, 4, `{"sockets":[{"id":0,"cores":4,"cpus":"0-7","core_list":[{"id":0,"cpus":"0,4"},`},
		{2, 96, `{"sockets":[{"id":0,"cores":96,"cpus":"0-95,192-287"},{"id":1,"cores":96,"cpus":"96-191,288-383"}]}`},
		{40, 1, `{"sockets":[{"id":0,"cores":1},{"id":1,"cores":1},`},
		{64, 1, ""},
	} {
		got := topologyJSON(machine(tc.sockets, tc.cores))
		if len(got) > hwlimit.MaxStringBytes || !strings.Contains(got, tc.want) {
			t.Errorf("%d×%d: got %s (%d bytes), want it to hold %s", tc.sockets, tc.cores, got, len(got), tc.want)
		}
		if got != "" && !json.Valid([]byte(got)) {
			t.Errorf("%d×%d: not JSON: %s", tc.sockets, tc.cores, got)
		}
	}
}
