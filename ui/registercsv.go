package ui

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/hostcsv"
	"github.com/eimhq/eim/inventory"
)

// CSV registration: the file of the original's bulk import tool, checked
// as `eim host import` checks it (package hostcsv: syntax, duplicates,
// references), and against the hosts already registered; nothing is
// created unless every line passes. Unlike the CLI, the page does not
// finish hosts an interrupted import left half made: a line whose host
// exists is an error that names it.

// maxUpload bounds the uploaded file.
const maxUpload = 8 << 20

type csvLineResult struct {
	N                     int
	Serial, UUID          string
	HostID, Link, Message string
	OK                    bool
}

type csvOutcome struct {
	Checked  bool // the preflight failed: nothing was created
	Lines    []csvLineResult
	Bad      int
	Created  int
	ErrorCSV string       // the lines with errors, as a file to fix
	ErrorURL template.URL // the same, as a data: URL to download
	FileErr  string       // the file as a whole is wrong
}

func (h *Handler) registerCSV(w http.ResponseWriter, r *http.Request, c *call) error {
	ctx := r.Context()
	proj := c.project.Name
	r.Body = http.MaxBytesReader(w, r.Body, maxUpload)
	d, err := h.registerData(r, c)
	if err != nil {
		return err
	}
	c.projects = h.readableProjects(r, c.p)
	out := &csvOutcome{}
	d.CSV = out
	show := func(status int) error {
		h.render(w, r, status, "register", c.view("register", "Register hosts", d))
		return nil
	}
	file, _, err := r.FormFile("file")
	var src []byte
	switch {
	case err == nil:
		var buf bytes.Buffer
		_, err = buf.ReadFrom(file)
		file.Close()
		if err != nil {
			out.FileErr = fmt.Sprintf("the file could not be read (at most %d MiB): %v", maxUpload>>20, err)
			return show(http.StatusBadRequest)
		}
		src = buf.Bytes()
	case strings.TrimSpace(r.PostFormValue("text")) != "":
		src = []byte(r.PostFormValue("text"))
	default:
		out.FileErr = "choose a CSV file, or paste its lines"
		return show(http.StatusBadRequest)
	}
	f, err := hostcsv.Parse(bytes.NewReader(src))
	if err == nil && len(f.Lines) == 0 {
		err = fmt.Errorf("no hosts in the file")
	}
	if err != nil {
		out.FileErr = err.Error()
		return show(http.StatusBadRequest)
	}
	f.CheckSyntax(hostcsv.Defaults{})
	refs, err := h.csvRefs(r, proj, f.Needs())
	if err != nil {
		return err
	}
	f.ResolveRefs(refs)
	if err := h.csvExisting(r, proj, f); err != nil {
		return err
	}
	var bad []*hostcsv.Line
	for _, l := range f.Lines {
		res := csvLineResult{N: l.N, Serial: l.Serial, UUID: l.UUID, OK: len(l.Errs) == 0, Message: strings.Join(l.Errs, "; ")}
		if !res.OK {
			bad = append(bad, l)
		}
		out.Lines = append(out.Lines, res)
	}
	if len(bad) > 0 {
		out.Checked, out.Bad = true, len(bad)
		var buf bytes.Buffer
		_ = hostcsv.WriteErrors(&buf, f, bad, func(l *hostcsv.Line) string { return strings.Join(l.Errs, "; ") })
		out.ErrorCSV = buf.String()
		// Made here from base64 alone: safe as a link (html/template
		// refuses data: URLs it did not see made).
		out.ErrorURL = template.URL("data:text/csv;base64," + base64.StdEncoding.EncodeToString(buf.Bytes()))
		return show(http.StatusBadRequest)
	}
	auto := r.PostFormValue("autoOnboard") != ""
	for i, l := range f.Lines {
		res := &out.Lines[i]
		id, err := h.registerLine(r, c, l, auto)
		res.HostID, res.Link = id, hostURL(proj, id)
		if err != nil {
			res.OK, res.Message = false, eim.ErrorMessage(err)
			if statusOf(err) == http.StatusInternalServerError {
				h.log.Error("ui: register from CSV", "line", l.N, "error", err)
				res.Message = "failed on the server; it has been logged"
			}
			if id != "" {
				res.Message = "host " + id + " is registered, but: " + res.Message
			}
			out.Bad++
			continue
		}
		res.Message = "registered"
		out.Created++
		if ctx.Err() != nil {
			break
		}
	}
	return show(http.StatusOK)
}

// csvRefs indexes the resources the file's lines may name.
func (h *Handler) csvRefs(r *http.Request, proj string, need hostcsv.Needs) (hostcsv.Refs, error) {
	var x hostcsv.Refs
	if need.OS {
		oses, _, err := listAll[*eim.OS](r, h.inv, proj, eim.KindOS)
		if err != nil {
			return x, err
		}
		x.OS = hostcsv.NewRefIndex(eim.KindOS)
		for _, o := range oses {
			x.OS.Add(o.ResourceID, []string{o.Name, o.ProfileName}, o.SecurityFeature)
		}
	}
	if need.Site {
		sites, _, err := listAll[*eim.Site](r, h.inv, proj, eim.KindSite)
		if err != nil {
			return x, err
		}
		x.Site = hostcsv.NewRefIndex(eim.KindSite)
		for _, s := range sites {
			x.Site.Add(s.ResourceID, []string{s.Name}, "")
		}
	}
	if need.Account {
		as, _, err := listAll[*eim.LocalAccount](r, h.inv, proj, eim.KindLocalAccount)
		if err != nil {
			return x, err
		}
		x.Account = hostcsv.NewRefIndex(eim.KindLocalAccount)
		for _, a := range as {
			x.Account.Add(a.ResourceID, []string{a.Username}, "")
		}
	}
	if need.Config {
		cs, _, err := listAll[*eim.CustomConfig](r, h.inv, proj, eim.KindCustomConfig)
		if err != nil {
			return x, err
		}
		x.Config = hostcsv.NewRefIndex(eim.KindCustomConfig)
		for _, cc := range cs {
			x.Config.Add(cc.ResourceID, []string{cc.Name}, "")
		}
	}
	return x, nil
}

// csvExisting fails the lines whose UUID or serial number a host of the
// project has already, as many per query as a filter holds.
func (h *Handler) csvExisting(r *http.Request, proj string, f *hostcsv.File) error {
	filters, idents := f.IdentityFilters()
	seen := map[*hostcsv.Line]bool{}
	for _, flt := range filters {
		for offset := 0; offset <= inventory.MaxOffset; offset += inventory.MaxPageSize {
			page, err := h.inv.List(r.Context(), proj, eim.KindHost, inventory.ListQuery{Filter: flt, PageSize: inventory.MaxPageSize, Offset: offset})
			if err != nil {
				return err
			}
			for _, it := range page.Items {
				host := it.(*eim.Host)
				for _, l := range idents.Lines(host) {
					if !seen[l] {
						seen[l] = true
						l.Fail("already registered as host %s (%s)", host.ResourceID, cmp.Or(host.Name, "no name"))
					}
				}
			}
			if !page.HasNext {
				break
			}
		}
	}
	return nil
}

// registerLine makes the host of a checked line through the API:
// registered, placed at its site with its metadata, then given its
// instance. It returns the host's ID once registered, with the error of a
// later step.
func (h *Handler) registerLine(r *http.Request, c *call, l *hostcsv.Line, auto bool) (string, error) {
	id, err := h.apiRegister(r, c, inventory.HostRegistration{
		Name: cmp.Or(l.Serial, strings.ToLower(l.UUID)), SerialNumber: l.Serial, UUID: l.UUID,
		AutoOnboard: auto, EnableVpro: l.AMTOn, UserLvmSize: l.LVMGB,
	})
	if err != nil {
		return "", err
	}
	var mask []string
	if l.SiteID != "" {
		mask = append(mask, "siteId")
	}
	if len(l.MD) > 0 {
		mask = append(mask, "metadata")
	}
	if len(mask) > 0 {
		if err := h.apiPatch(r, c, "/compute/hosts/"+url.PathEscape(id), &eim.Host{SiteID: l.SiteID, Metadata: l.MD}, mask...); err != nil {
			return id, fmt.Errorf("place the host: %w", err)
		}
	}
	if l.OSID != "" {
		in := &eim.Instance{Kind: eim.InstanceKindMetal, Name: cmp.Or(l.Serial, strings.ToLower(l.UUID)), HostID: id,
			OSID: l.OSID, SecurityFeature: l.SecFeature, LocalAccountID: l.AccountID, CustomConfigIDs: l.ConfigIDs}
		if _, err := h.apiCreate(r, c, "/compute/instances", in, "kind", "name", "hostID", "osID", "securityFeature", "localAccountID", "customConfigID"); err != nil {
			return id, fmt.Errorf("create the instance: %w", err)
		}
	}
	return id, nil
}
