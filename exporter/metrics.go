package exporter

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"

	"github.com/eimhq/eim/hostview"
)

// The series, in two parts:
//
//   - the fleet's aggregates, histograms and the exporter's own gauges:
//     const metrics of a client_golang collector, gathered and encoded by
//     the library;
//   - the original's per-host series (up to ~27 a host): written line by
//     line, since gathering millions of metrics through the registry
//     costs seconds and gigabytes. Each host's identity labels are
//     rendered once by the library's text encoder (which escapes them)
//     and kept with the host's record; a line is then the family's name,
//     those labels, a value label rendered the same way at start, and 0
//     or 1.

// durationBuckets are the upper bounds (seconds) of the duration
// histograms: seconds for simulated fleets, minutes for real installs,
// days for machines registered long before they were powered on.
var durationBuckets = [...]float64{1, 2, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 43200, 86400, 604800}

// Descriptions of the library-rendered series.
var (
	descHosts = prometheus.NewDesc("eim_hosts",
		"Hosts by project, site (ID; \"\" for none) and host status (the values of edge_host_status).",
		[]string{"project", "site", "status"}, nil)
	descOnboarding = prometheus.NewDesc("eim_hosts_onboarding",
		"Hosts by project, site and onboarding status (the values of edge_host_onboarding_status).",
		[]string{"project", "site", "status"}, nil)
	descProvisioning = prometheus.NewDesc("eim_hosts_provisioning",
		"Hosts by project, site and their instance's provisioning status (the values of edge_host_provisioning_status; \"Not Provisioned\" without an instance).",
		[]string{"project", "site", "status"}, nil)
	descUpdate = prometheus.NewDesc("eim_hosts_update",
		"Hosts by project, site and their instance's update status (the values of edge_host_update_status; \"No Current Update\" without an instance).",
		[]string{"project", "site", "status"}, nil)
	descMaintenance = prometheus.NewDesc("eim_hosts_in_maintenance",
		"Hosts by project and site that an open maintenance window (single or repeated, of the host, its site or a region above it) covers now.",
		[]string{"project", "site"}, nil)
	descSite = prometheus.NewDesc("eim_site_info",
		"1 for each site, with its name and region: join it to the aggregates' site label.",
		[]string{"project", "site", "name", "region"}, nil)
	descOnboardingDur = prometheus.NewDesc("eim_host_onboarding_duration_seconds",
		"The onboarded hosts that exist now by the time from their registration to their onboarding (a histogram of the fleet, not of events: use histogram_quantile on the buckets, without rate).",
		[]string{"project"}, nil)
	descProvisioningDur = prometheus.NewDesc("eim_host_provisioning_duration_seconds",
		"The provisioned hosts that exist now by the time from when their OS installation could start (the later of the host's onboarding and its instance's creation) to \"Provisioned\" (a histogram of the fleet).",
		[]string{"project"}, nil)
	descRunningDur = prometheus.NewDesc("eim_host_time_to_running_seconds",
		"The hosts whose instance is RUNNING by the time from their registration to RUNNING (a histogram of the fleet).",
		[]string{"project"}, nil)
	descLive = prometheus.NewDesc("eim_exporter_snapshot_live",
		"1 while the exporter's snapshot follows the change feed; 0 while it is (re)loading or the store is away (the series then show the last state known).",
		nil, nil)
	descUnrecognised = prometheus.NewDesc("eim_exporter_unrecognised_statuses",
		"Hosts whose status text in this field the exporter does not know (shown as \"Unknown\"): a text a module writes that the exporter should learn.",
		[]string{"field"}, nil)
)

// fleetCollector collects a view's library-rendered series.
type fleetCollector struct {
	v    *view
	live bool
}

// Describe sends nothing: the collector is unchecked (its series depend
// on the fleet).
func (fleetCollector) Describe(chan<- *prometheus.Desc) {}

type siteKey struct{ project, site string }

// siteAgg counts a (project, site)'s hosts by each status field's value.
type siteAgg struct {
	counts      [4][]int // hostStatuses, onboarding, provisioning, update
	maintenance int
}

// statusFields are the sets of the aggregates, in siteAgg.counts order.
var statusFields = [4]*statusSet{&hostStatuses, &onboardingStatuses, &provisioningStatuses, &updateStatuses}

func (c fleetCollector) Collect(ch chan<- prometheus.Metric) {
	v := c.v
	ch <- prometheus.MustNewConstMetric(descLive, prometheus.GaugeValue, b2f(c.live))
	if v == nil {
		return
	}
	sites := map[siteKey]*siteAgg{}
	hists := map[string]*[3]histo{}
	var unrecognised [4]int
	for i := range v.hosts {
		hv := &v.hosts[i]
		h := hv.h
		agg := sites[siteKey{h.Project(), h.SiteID()}]
		if agg == nil {
			agg = &siteAgg{}
			for j, set := range statusFields {
				agg.counts[j] = make([]int, len(set.values))
			}
			sites[siteKey{h.Project(), h.SiteID()}] = agg
		}
		hs := hists[h.Project()]
		if hs == nil {
			hs = &[3]histo{}
			hists[h.Project()] = hs
		}
		if hv.maintenance {
			agg.maintenance++
		}
		agg.counts[0][hv.f.status]++
		agg.counts[1][hv.f.onboarding]++
		agg.counts[2][hv.prov()]++
		agg.counts[3][hv.update()]++
		for j, ok := range [4]bool{hv.f.statusOK, hv.f.onboardingOK, hv.f.provOK, hv.f.updateOK} {
			if !ok {
				unrecognised[j]++
			}
		}
		if x, ok := hv.onboardingDuration(); ok {
			hs[0].observe(x)
		}
		if x, ok := hv.provisioningDuration(); ok {
			hs[1].observe(x)
		}
		if x, ok := hv.timeToRunning(); ok {
			hs[2].observe(x)
		}
	}
	// Every value of a (project, site) that has hosts, 0 included: a
	// dashboard shows 0 rather than nothing.
	descs := [4]*prometheus.Desc{descHosts, descOnboarding, descProvisioning, descUpdate}
	for sk, agg := range sites {
		for j, set := range statusFields {
			for vi, name := range set.values {
				ch <- prometheus.MustNewConstMetric(descs[j], prometheus.GaugeValue, float64(agg.counts[j][vi]), sk.project, sk.site, name)
			}
		}
		ch <- prometheus.MustNewConstMetric(descMaintenance, prometheus.GaugeValue, float64(agg.maintenance), sk.project, sk.site)
	}
	for j, set := range statusFields {
		ch <- prometheus.MustNewConstMetric(descUnrecognised, prometheus.GaugeValue, float64(unrecognised[j]), set.field)
	}
	for p, t := range v.trees {
		for id, s := range t.sites {
			ch <- prometheus.MustNewConstMetric(descSite, prometheus.GaugeValue, 1, p, id, s.name, s.region)
		}
	}
	for p, hs := range hists {
		for j, desc := range []*prometheus.Desc{descOnboardingDur, descProvisioningDur, descRunningDur} {
			if hs[j].count > 0 {
				ch <- prometheus.MustNewConstHistogram(desc, hs[j].count, hs[j].sum, hs[j].cumulative(), p)
			}
		}
	}
}

// histo counts observations per bucket.
type histo struct {
	count  uint64
	sum    float64
	counts [len(durationBuckets) + 1]uint64 // per bucket, not cumulative; the last: above every bound
}

func (h *histo) observe(x float64) {
	h.count++
	h.sum += x
	i, _ := slices.BinarySearch(durationBuckets[:], x)
	h.counts[i]++
}

// cumulative returns the buckets as the library takes them: the count of
// observations up to each bound.
func (h *histo) cumulative() map[float64]uint64 {
	out := make(map[float64]uint64, len(durationBuckets))
	var n uint64
	for i, b := range durationBuckets {
		n += h.counts[i]
		out[b] = n
	}
	return out
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// The per-host families, with their value label and value sets (none for
// the two single series).
type hostFamily struct {
	name, help, valueLabel string
	set                    *statusSet
	value                  func(*hostView) uint8 // the current value's index
	header                 []byte                // # HELP and # TYPE, by the library
	values                 [][]byte              // `,label="value"`, by the library
}

var hostFamilies = []*hostFamily{
	{name: "edge_host_status", valueLabel: "status", set: &hostStatuses, value: func(hv *hostView) uint8 { return hv.f.status },
		help: "1 for the host's current status (hostStatus, folded: \"Error: …\" is \"Error\"), 0 for the other values."},
	{name: "edge_host_onboarding_status", valueLabel: "onboardingStatus", set: &onboardingStatuses, value: func(hv *hostView) uint8 { return hv.f.onboarding },
		help: "1 for the host's current onboarding status, 0 for the other values."},
	{name: "edge_host_provisioning_status", valueLabel: "provisioningStatus", set: &provisioningStatuses, value: (*hostView).prov,
		help: "1 for the provisioning status of the host's instance (folded: \"Provisioning In Progress: 3/7 …\" is \"Provisioning In Progress\"; \"Not Provisioned\" without an instance), 0 for the other values."},
	{name: "edge_host_update_status", valueLabel: "updateStatus", set: &updateStatuses, value: (*hostView).update,
		help: "1 for the update status of the host's instance (\"No Current Update\" without an instance), 0 for the other values."},
	{name: "edge_host_schedule",
		help: "1 while an open maintenance window (single or repeated, of the host, its site or a region above it) covers the host, else 0."},
	{name: "edge_host_total_provisioning_time",
		help: "Seconds from the node's first call home to its instance RUNNING; for hosts whose instance is running."},
}

func init() {
	for _, f := range hostFamilies {
		f.header = renderHeader(f.name, f.help)
		if f.set != nil {
			for _, v := range f.set.values {
				f.values = append(f.values, append([]byte{','}, renderLabels([]string{f.valueLabel, v})...))
			}
		}
	}
	compressHeaders()
}

// renderHeader returns the # HELP and # TYPE lines of a gauge family as
// the library writes them.
func renderHeader(name, help string) []byte {
	out := renderText(&dto.MetricFamily{Name: proto.String(name), Help: proto.String(help), Type: dto.MetricType_GAUGE.Enum(),
		Metric: []*dto.Metric{{Gauge: &dto.Gauge{Value: proto.Float64(0)}}}})
	// Drop the sample line ("name 0\n").
	i := bytes.LastIndexByte(out[:len(out)-1], '\n')
	return out[:i+1]
}

// renderLabels returns name="value" pairs (pairs holds names and values
// in turn) as the library writes them between a sample's braces: the
// values escaped, and invalid UTF-8 replaced (Prometheus refuses it).
func renderLabels(pairs []string) []byte {
	m := &dto.Metric{Gauge: &dto.Gauge{Value: proto.Float64(0)}}
	for i := 0; i < len(pairs); i += 2 {
		m.Label = append(m.Label, &dto.LabelPair{Name: proto.String(pairs[i]), Value: proto.String(strings.ToValidUTF8(pairs[i+1], string(utf8.RuneError)))})
	}
	out := renderText(&dto.MetricFamily{Name: proto.String("x"), Type: dto.MetricType_GAUGE.Enum(), Metric: []*dto.Metric{m}})
	// The sample line is `x{labels} 0\n`: what the braces hold.
	i := bytes.LastIndex(out, []byte("\nx{"))
	return out[i+3 : len(out)-len("} 0\n")]
}

func renderText(mf *dto.MetricFamily) []byte {
	var b bytes.Buffer
	if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
		panic(fmt.Sprintf("exporter: render %s: %v", mf.GetName(), err)) // the families are ours
	}
	return b.Bytes()
}

// appendLabels appends the host's identity labels as the library
// writes them between a sample's braces (renderLabels): the values
// escaped, invalid UTF-8 replaced.
func appendLabels(b []byte, h *hostview.Host, projectID string) []byte {
	for i, l := range [...]struct{ name, value string }{{"hostID", h.ID()}, {"deviceGuid", h.UUID()}, {"name", h.Name()},
		{"hostname", h.Hostname()}, {"serial", h.SerialNumber()}, {"projectId", projectID}} {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, l.name...)
		b = append(b, '=', '"')
		b = appendEscaped(b, l.value)
		b = append(b, '"')
	}
	return b
}

// appendEscaped appends a label value as the text format writes it:
// backslash, double quote and line feed escaped, invalid UTF-8 replaced
// (Prometheus refuses it).
func appendEscaped(b []byte, v string) []byte {
	plain := true
	for i := 0; i < len(v) && plain; i++ {
		c := v[i]
		plain = c < utf8.RuneSelf && c != '\\' && c != '"' && c != '\n'
	}
	if plain {
		return append(b, v...)
	}
	for _, r := range strings.ToValidUTF8(v, string(utf8.RuneError)) {
		switch r {
		case '\\':
			b = append(b, '\\', '\\')
		case '"':
			b = append(b, '\\', '"')
		case '\n':
			b = append(b, '\\', 'n')
		default:
			b = utf8.AppendRune(b, r)
		}
	}
	return b
}

// writeHostSeries writes the per-host families of the hosts whose project
// shows them.
func (s *Service) writeHostSeries(w io.Writer, v *view) error {
	shown := make([]*hostView, 0, len(v.hosts))
	ids := make([]string, 0, len(v.hosts))
	for i := range v.hosts {
		hv := &v.hosts[i]
		p := v.projects[hv.h.Project()]
		if p == nil || p.perHostOff {
			continue
		}
		shown = append(shown, hv)
		ids = append(ids, p.id)
	}
	if len(shown) == 0 {
		return nil
	}
	labels := make([][]byte, len(shown))
	for i, hv := range shown {
		labels[i] = appendLabels(nil, hv.h, ids[i])
	}
	buf := make([]byte, 0, 64<<10)
	for _, f := range hostFamilies {
		buf = append(buf, f.header...)
		for i, hv := range shown {
			buf = f.appendHost(buf, hv, labels[i])
			if len(buf) >= 60<<10 {
				if _, err := w.Write(buf); err != nil {
					return err
				}
				buf = buf[:0]
			}
		}
	}
	_, err := w.Write(buf)
	return err
}

// appendHost appends the family's lines of a host whose identity labels
// are labels (appendLabels).
func (f *hostFamily) appendHost(b []byte, hv *hostView, labels []byte) []byte {
	switch {
	case f.set != nil:
		cur := int(f.value(hv))
		for vi, val := range f.values {
			b = appendLine(b, f.name, labels, val, b2f(vi == cur))
		}
	case f.name == "edge_host_schedule":
		b = appendLine(b, f.name, labels, nil, b2f(hv.maintenance))
	default: // edge_host_total_provisioning_time
		if x, ok := hv.totalProvisioningTime(); ok {
			b = appendLine(b, f.name, labels, nil, x)
		}
	}
	return b
}

// appendLine appends `name{labels,value} x`.
func appendLine(b []byte, name string, labels, value []byte, x float64) []byte {
	b = append(b, name...)
	b = append(b, '{')
	b = append(b, labels...)
	b = append(b, value...)
	b = append(b, '}', ' ')
	b = strconv.AppendFloat(b, x, 'g', -1, 64)
	return append(b, '\n')
}
