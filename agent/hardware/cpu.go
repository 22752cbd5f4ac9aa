package hardware

import (
	"cmp"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/jaypipes/ghw"
	ghwcpu "github.com/jaypipes/ghw/pkg/cpu"

	"github.com/eimhq/eim/hwlimit"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
)

func (c *collector) cpu(h *hostv1.Hardware) error {
	info, err := ghw.CPU(c.ghw)
	if err != nil {
		return err
	}
	h.Cpu = &hostv1.Cpu{Architecture: architecture()}
	if len(info.Processors) == 0 {
		// ghw logs and returns nothing when /proc/cpuinfo or
		// /sys/devices/system/cpu cannot be read.
		return errors.New("no processors found")
	}
	first := info.Processors[0]
	h.Cpu.Model = strings.TrimSpace(first.Model)
	h.Cpu.Sockets = uint32(len(info.Processors))
	h.Cpu.Cores = info.TotalCores
	h.Cpu.Threads = info.TotalHardwareThreads
	h.Cpu.Capabilities = capabilities(first.Capabilities)
	h.Cpu.TopologyJson = topologyJSON(info.Processors)
	return nil
}

// capabilities sorts and deduplicates CPU flags and drops empty ones
// (cpuinfo separates them by single spaces, but not always).
func capabilities(flags []string) []string {
	var out []string
	for _, f := range flags {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// topology is the JSON document of Cpu.topology_json:
//
//	{"sockets":[{"id":0,"cores":2,"cpus":"0-3",
//	             "core_list":[{"id":0,"cpus":"0,2"},{"id":1,"cpus":"1,3"}]}]}
//
// Sockets (physical packages) and cores carry the kernel's IDs; "cpus" are
// logical processor IDs in the kernel's cpulist form ("0-3,8"). "cores" counts
// a socket's cores. A large machine's core_list does not fit the message's
// 1,024 bytes; it is then left out of every socket, and if the sockets'
// "cpus" do not fit either, they go too: a consumer gets fewer details, never
// a cut document.
type topology struct {
	Sockets []topoSocket `json:"sockets"`
}

type topoSocket struct {
	ID       int        `json:"id"`
	Cores    int        `json:"cores"`
	CPUs     string     `json:"cpus,omitempty"`
	CoreList []topoCore `json:"core_list,omitempty"`
}

type topoCore struct {
	ID   int    `json:"id"`
	CPUs string `json:"cpus"`
}

func topologyJSON(procs []*ghwcpu.Processor) string {
	var t topology
	for _, p := range procs {
		s := topoSocket{ID: p.ID, Cores: len(p.Cores)}
		var all []int
		for _, core := range p.Cores {
			s.CoreList = append(s.CoreList, topoCore{ID: core.ID, CPUs: cpulist(core.LogicalProcessors)})
			all = append(all, core.LogicalProcessors...)
		}
		slices.SortFunc(s.CoreList, func(a, b topoCore) int { return cmp.Compare(a.ID, b.ID) })
		s.CPUs = cpulist(all)
		t.Sockets = append(t.Sockets, s)
	}
	slices.SortFunc(t.Sockets, func(a, b topoSocket) int { return cmp.Compare(a.ID, b.ID) })
	for _, shrink := range []func(*topoSocket){
		func(*topoSocket) {},
		func(s *topoSocket) { s.CoreList = nil },
		func(s *topoSocket) { s.CPUs = "" },
	} {
		for i := range t.Sockets {
			shrink(&t.Sockets[i])
		}
		if b, err := json.Marshal(t); err == nil && len(b) <= hwlimit.MaxStringBytes {
			return string(b)
		}
	}
	return ""
}

// cpulist writes logical processor IDs as the kernel does: sorted, runs as
// ranges ("0-3,8,10-11").
func cpulist(ids []int) string {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	var b strings.Builder
	for i := 0; i < len(ids); {
		j := i
		for j+1 < len(ids) && ids[j+1] == ids[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(ids[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(ids[j]))
		}
		i = j + 1
	}
	return b.String()
}
