package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/client"
)

// eim edgeworkload apply|list|get|delete|status|logs: edge workloads (the
// workloads module).

const edgeWorkloadUsage = `Usage:
  eim edgeworkload apply -f FILE|-           create or replace (a new revision when the spec changed)
  eim edgeworkload list [--filter 'name:"cam*"'] [--page-size N] [--offset N]
  eim edgeworkload get NAME
  eim edgeworkload delete NAME
  eim edgeworkload status NAME               devices by status and revision, and each device
  eim edgeworkload logs NAME --host HOST [--container C] [--tail N]
  eim edgeworkload rollout status NAME       the rollout: revisions, state and reason, batch, devices
  eim edgeworkload rollout pause|resume|abort NAME
  eim edgeworkload rollout rollback NAME     the previous revision again, as a new revision and rollout

apply takes EIM's own document (JSON or YAML: name, spec) or a Flotta EdgeWorkload
(apiVersion management.project-flotta.io/v1alpha1) unchanged: its fields are mapped,
and what EIM cannot map is refused naming the field (docs/workloads.md). Warnings
(an image without a tag or digest) are printed to standard error.
`

func (c *cli) edgeWorkload(args []string) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(c.stdout, edgeWorkloadUsage)
		if len(args) == 0 {
			return usagef("edgeworkload: a verb is required (apply, list, get, delete, status, logs, rollout)")
		}
		return nil
	}
	switch verb, rest := args[0], args[1:]; verb {
	case "apply":
		return c.edgeWorkloadApply(rest)
	case "list":
		return c.edgeWorkloadList(rest)
	case "get":
		return c.edgeWorkloadGet(rest)
	case "delete":
		return c.edgeWorkloadDelete(rest)
	case "status":
		return c.edgeWorkloadStatus(rest)
	case "logs":
		return c.edgeWorkloadLogs(rest)
	case "rollout":
		return c.edgeWorkloadRollout(rest)
	default:
		return usagef("edgeworkload: unknown verb %q (apply, list, get, delete, status, logs, rollout)", verb)
	}
}

// ewArgs parses "eim edgeworkload VERB [NAME]" with extra flags.
func (c *cli) ewArgs(verb string, names int, args []string, extra func(*flag.FlagSet)) ([]string, error) {
	syn := "eim edgeworkload " + verb
	if names > 0 {
		syn += " NAME"
	}
	fs := c.flagSet(syn, syn, "")
	c.globalFlags(fs)
	if extra != nil {
		extra(fs)
	}
	pos, err := c.parseAll(fs, args)
	if err != nil {
		return nil, err
	}
	if err := wantArgs("edgeworkload "+verb, pos, names, "a workload name"); err != nil {
		return nil, err
	}
	return pos, nil
}

func (c *cli) edgeWorkloadApply(args []string) error {
	var file string
	if _, err := c.ewArgs("apply", 0, args, func(fs *flag.FlagSet) {
		fs.StringVar(&file, "f", "", "the document (- for standard input)")
	}); err != nil {
		return err
	}
	var (
		doc []byte
		err error
	)
	switch file {
	case "":
		return usagef("edgeworkload apply: -f FILE is required")
	case "-":
		doc, err = c.readStdin()
	default:
		doc, err = os.ReadFile(file)
	}
	if err != nil {
		return usagef("-f: %v", err)
	}
	in, err := client.ParseEdgeWorkload(doc)
	if err != nil {
		return err
	}
	cl, err := c.clientFor()
	if err != nil {
		return err
	}
	w, err := cl.ApplyEdgeWorkload(c.ctx, c.g.project, in)
	if err != nil {
		return err
	}
	for _, m := range w.Warnings {
		fmt.Fprintln(c.stderr, "warning:", m)
	}
	return c.printEdgeWorkloads([]*client.EdgeWorkload{w})
}

func (c *cli) edgeWorkloadList(args []string) error {
	var (
		filter       string
		size, offset int
	)
	if _, err := c.ewArgs("list", 0, args, func(fs *flag.FlagSet) {
		fs.StringVar(&filter, "filter", "", `name="x" or name:"prefix*", joined by AND`)
		fs.IntVar(&size, "page-size", 0, "workloads per page (1 to 100; default 20)")
		fs.IntVar(&offset, "offset", 0, "workloads to skip")
	}); err != nil {
		return err
	}
	cl, err := c.clientFor()
	if err != nil {
		return err
	}
	page, err := cl.ListEdgeWorkloads(c.ctx, c.g.project, filter, size, offset)
	if err != nil {
		return err
	}
	if c.g.output == "json" {
		return c.printJSON(page)
	}
	return c.printEdgeWorkloads(page.EdgeWorkloads)
}

func (c *cli) printEdgeWorkloads(ws []*client.EdgeWorkload) error {
	switch c.g.output {
	case "json":
		if len(ws) == 1 {
			return c.printJSON(ws[0])
		}
		return c.printJSON(ws)
	case "id":
		for _, w := range ws {
			fmt.Fprintln(c.stdout, w.Name)
		}
		return nil
	}
	var rows [][]string
	for _, w := range ws {
		sel := w.Spec.Device
		if s := w.Spec.DeviceSelector; s != nil {
			var parts []string
			for k, v := range s.MatchLabels {
				parts = append(parts, k+"="+v)
			}
			for _, e := range s.MatchExpressions {
				parts = append(parts, e.Key+" "+e.Operator+" "+strings.Join(e.Values, ","))
			}
			sel = strings.Join(parts, "; ")
		}
		var images []string
		for _, ct := range w.Spec.Pod.Spec.Containers {
			images = append(images, ct.Image)
		}
		rows = append(rows, []string{w.Name, strconv.FormatInt(w.Revision, 10), sel, strings.Join(images, ","), w.UpdatedAt.Format("2006-01-02T15:04:05Z")})
	}
	return c.printTable([]string{"NAME", "REVISION", "DEVICES", "IMAGES", "UPDATED"}, rows)
}

func (c *cli) edgeWorkloadGet(args []string) error {
	pos, err := c.ewArgs("get", 1, args, nil)
	if err != nil {
		return err
	}
	cl, err := c.clientFor()
	if err != nil {
		return err
	}
	w, err := cl.GetEdgeWorkload(c.ctx, c.g.project, pos[0])
	if err != nil {
		return err
	}
	if c.g.output == "table" {
		// The spec does not fit a table: JSON, as the API has it.
		return c.printJSON(w)
	}
	return c.printEdgeWorkloads([]*client.EdgeWorkload{w})
}

func (c *cli) edgeWorkloadDelete(args []string) error {
	pos, err := c.ewArgs("delete", 1, args, nil)
	if err != nil {
		return err
	}
	cl, err := c.clientFor()
	if err != nil {
		return err
	}
	if err := cl.DeleteEdgeWorkload(c.ctx, c.g.project, pos[0]); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "deleted edge workload %s (its devices remove its pod)\n", pos[0])
	return nil
}

func (c *cli) edgeWorkloadStatus(args []string) error {
	pos, err := c.ewArgs("status", 1, args, nil)
	if err != nil {
		return err
	}
	cl, err := c.clientFor()
	if err != nil {
		return err
	}
	st, devs, err := cl.EdgeWorkloadStatus(c.ctx, c.g.project, pos[0])
	if err != nil {
		return err
	}
	if c.g.output == "json" {
		return c.printJSON(map[string]any{"status": st, "devices": devs})
	}
	d := st.Devices
	fmt.Fprintf(c.stdout, "%s at revision %d: %d devices: %d running, %d degraded, %d failed, %d updating, %d unknown, %d removing\n\n",
		st.Name, st.Revision, d.Total, d.Running, d.Degraded, d.Failed, d.Updating, d.Unknown, d.Removing)
	if ro := st.Rollout; ro != nil {
		fmt.Fprintf(c.stdout, "rollout to revision %d: %s since %s, batch %d", ro.ToRevision, ro.State, ro.Since.Format(time.RFC3339), ro.Batch)
		if ro.Reason != "" {
			fmt.Fprintf(c.stdout, ": %s", ro.Reason)
		}
		fmt.Fprint(c.stdout, "\n\n")
	}
	var rows [][]string
	for _, dv := range devs {
		restarts := 0
		for _, ct := range dv.Containers {
			restarts += int(ct.Restarts)
		}
		rows = append(rows, []string{dv.HostID, dv.Summary, dv.Phase, strconv.FormatInt(dv.TargetRevision, 10), strconv.FormatInt(dv.Revision, 10),
			strconv.Itoa(restarts), dv.LastError})
	}
	return c.printTable([]string{"HOST", "STATUS", "PHASE", "TARGET", "RUNNING", "RESTARTS", "LAST ERROR"}, rows)
}

func (c *cli) edgeWorkloadLogs(args []string) error {
	var (
		host, container string
		tail            int
	)
	pos, err := c.ewArgs("logs", 1, args, func(fs *flag.FlagSet) {
		fs.StringVar(&host, "host", "", "the device (host ID)")
		fs.StringVar(&container, "container", "", "one container (default: all)")
		fs.IntVar(&tail, "tail", 100, "lines per container")
	})
	if err != nil {
		return err
	}
	if host == "" {
		return usagef("edgeworkload logs: --host is required")
	}
	cl, err := c.clientFor()
	if err != nil {
		return err
	}
	lv, err := cl.EdgeWorkloadLogs(c.ctx, c.g.project, pos[0], host, container, tail)
	if err != nil {
		return err
	}
	if c.g.output == "json" {
		return c.printJSON(lv)
	}
	if lv.State != "answered" {
		fmt.Fprintf(c.stdout, "the device has not answered yet (it asks at its next heartbeat); request %s: GET …/edgeworkloads/%s/logs/%s\n", lv.ID, pos[0], lv.ID)
		return nil
	}
	if lv.Error != "" {
		return fmt.Errorf("the device could not read the logs: %s", lv.Error)
	}
	for _, l := range lv.Logs {
		fmt.Fprintf(c.stdout, "==> %s <==\n%s", l.Container, l.Text)
		if !strings.HasSuffix(l.Text, "\n") {
			fmt.Fprintln(c.stdout)
		}
	}
	return nil
}

func (c *cli) edgeWorkloadRollout(args []string) error {
	if len(args) == 0 {
		return usagef("edgeworkload rollout: a verb is required (status, pause, resume, abort, rollback)")
	}
	verb := args[0]
	switch verb {
	case "status", "pause", "resume", "abort", "rollback":
	default:
		return usagef("edgeworkload rollout: unknown verb %q (status, pause, resume, abort, rollback)", verb)
	}
	pos, err := c.ewArgs("rollout "+verb, 1, args[1:], nil)
	if err != nil {
		return err
	}
	cl, err := c.clientFor()
	if err != nil {
		return err
	}
	var v *eim.EdgeWorkloadRolloutView
	switch verb {
	case "status":
		v, err = cl.EdgeWorkloadRollout(c.ctx, c.g.project, pos[0])
	case "rollback":
		w, err := cl.RollbackEdgeWorkload(c.ctx, c.g.project, pos[0])
		if err != nil {
			return err
		}
		if c.g.output == "json" {
			return c.printJSON(w)
		}
		fmt.Fprintf(c.stdout, "%s: revision %d is the previous revision's spec again; it is rolled out as a new rollout\n", w.Name, w.Revision)
		return nil
	default:
		v, err = cl.EdgeWorkloadRolloutAction(c.ctx, c.g.project, pos[0], verb)
	}
	if err != nil {
		return err
	}
	if c.g.output == "json" {
		return c.printJSON(v)
	}
	from := "nothing"
	if v.FromRevision > 0 {
		from = "revision " + strconv.FormatInt(v.FromRevision, 10)
	}
	fmt.Fprintf(c.stdout, "%s: rollout %d, %s to revision %d: %s since %s\n", v.Name, v.ID, from, v.ToRevision, v.State, v.Since.Format(time.RFC3339))
	if v.Reason != "" {
		fmt.Fprintf(c.stdout, "  %s\n", v.Reason)
	}
	started := ""
	if !v.BatchStarted {
		started = " (not started)"
	}
	fmt.Fprintf(c.stdout, "batch %d of %d%s: threshold %s, update timeout %s\n", v.Batch, v.Batches, started, v.SuccessThreshold, v.UpdateTimeout)
	cb, d := v.CurrentBatch, v.Devices
	fmt.Fprintf(c.stdout, "  this batch: %d devices: %d done, %d updating, %d waiting, %d failed\n", cb.Total, cb.Done, cb.Updating, cb.Waiting, cb.Failed)
	fmt.Fprintf(c.stdout, "  all batches: %d done, %d updating, %d waiting, %d failed (of %d devices selected at the start)\n", d.Done, d.Updating, d.Waiting, d.Failed, d.Total)
	if len(v.Failed) == 0 {
		return nil
	}
	fmt.Fprintln(c.stdout)
	var rows [][]string
	for _, f := range v.Failed {
		rows = append(rows, []string{f.HostID, strconv.Itoa(f.Batch), f.Since.Format(time.RFC3339), f.Reason})
	}
	return c.printTable([]string{"FAILED HOST", "BATCH", "SINCE", "REASON"}, rows)
}
