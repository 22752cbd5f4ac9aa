package spec

import (
	"cmp"
	"strings"

	"github.com/eimhq/eim"
)

const projectPrefix = "/v1/projects/{projectName}"

// op is one operation of the document.
type op struct {
	method  string
	id      string // operationId
	tag     string
	summary string
	desc    string
	params  []any    // parameter objects or $refs, after projectName
	body    *obj     // request body schema; nil for none
	rawBody bool     // the request body is the bytes of a file (application/octet-stream)
	ok      *obj     // response 200 (a components/responses $ref or a response object)
	started *obj     // response 202, for an operation that may start work and answer before it is done
	write   bool     // changes state: may answer 409
	public  bool     // needs no token and is outside any project
	errs    []string // the error statuses a public operation answers
	noProj  bool     // not under /v1/projects/{projectName}
	no404   bool     // names nothing that could be missing
	alias   string   // operationId of the primary operation this one repeats
	status  string   // status of the success answer ok; "" for 200
	v2      bool     // an operation of the v2 API: its error answers are v2Errors
}

func pref(name string) *obj { return o("$ref", "#/components/parameters/"+name) }

func okJSON(desc string, schema *obj) *obj {
	return o("description", desc, "content", o("application/json", o("schema", schema)))
}

// idParam is the {resourceId} path parameter of kind k.
func idParam(k eim.Kind) *obj { return idParamOf(docOf(k)) }

// idParamOf is the {resourceId} path parameter of a resource type.
func idParamOf(rd resourceDoc) *obj {
	desc := "ID of the " + rd.noun + ". The kind is read from the prefix: an ID of another kind, or without a known prefix, " +
		"is answered with 400; one with this kind's prefix that is malformed after it, like one that does not exist, with 404."
	if rd.variant != "" {
		desc += " The ID of a resource of the same kind but the other type (logs or metrics) is 404 here."
	}
	return o("name", "resourceId", "in", "path", "required", true,
		"description", desc, "schema", o("type", "string", "pattern", idPattern(rd.kind)))
}

func regionPathParam() *obj {
	return o("name", "regionId", "in", "path", "required", true,
		"description", "ID of the region the sites are in. Listing shows only its sites; a site written here gets this "+
			"region (a different regionId in the body is 400); a site of another region is 404. "+
			"`*` is any region, as in the original (whose web UI sends it for a site whose region it does not know): "+
			"every site of the project, and a site created here takes the body's regionId.",
		"schema", o("type", "string", "pattern", anyRegionPattern()))
}

func regionQueryParam() *obj {
	return o("name", "regionId", "in", "query",
		"description", "Optional region scope, with the same effect as the region-scoped paths (`*`: any region).",
		"schema", o("type", "string", "pattern", anyRegionPattern()))
}

// anyRegionPattern is a region ID or `*`.
func anyRegionPattern() string { return `^\*$|` + idPattern(eim.KindRegion) }

// pathSet collects operations by path, in insertion order.
type pathSet struct {
	paths *obj
	ops   map[string]op // by "method path" (lower-case method, full path)
}

func (ps *pathSet) add(path string, ops ...op) {
	full := path
	if len(ops) > 0 && !ops[0].noProj {
		full = projectPrefix + path
	}
	item, _ := ps.paths.get(full)
	pi, _ := item.(*obj)
	if pi == nil {
		pi = o()
		ps.paths.set(full, pi)
	}
	for _, x := range ops {
		pi.set(x.method, x.render())
		if ps.ops == nil {
			ps.ops = map[string]op{}
		}
		ps.ops[x.method+" "+full] = x
	}
}

func (x op) render() *obj {
	out := o("tags", []string{x.tag}, "operationId", x.id, "summary", x.summary)
	desc := x.desc
	if x.alias != "" {
		desc = strings.TrimSpace(desc + "\n\nThe same operation as " + x.alias + ", under another path the original API also served.")
	}
	if desc != "" {
		out.set("description", desc)
	}
	var params []any
	if !x.noProj {
		params = append(params, pref("projectName"))
	}
	params = append(params, x.params...)
	if len(params) > 0 {
		out.set("parameters", params)
	}
	if x.body != nil {
		out.set("requestBody", o("required", true, "content", o("application/json", o("schema", x.body))))
	}
	if x.rawBody {
		out.set("requestBody", o("required", true, "content", o("application/octet-stream", o("schema", o("type", "string", "format", "binary")))))
	}
	resp := o(cmp.Or(x.status, "200"), x.ok)
	if x.started != nil {
		resp.set("202", x.started)
	}
	if x.v2 {
		for _, st := range x.v2Statuses() {
			resp.set(st, o("$ref", "#/components/responses/"+v2Errors[st].name))
		}
		out.set("responses", resp)
		return out
	}
	if !x.public {
		statuses := []string{"400", "401", "403"}
		if !x.no404 {
			statuses = append(statuses, "404")
		}
		if x.write && x.method != "delete" {
			statuses = append(statuses, "409")
		}
		if x.body != nil || x.rawBody {
			statuses = append(statuses, "413")
		}
		statuses = append(statuses, "429", "500", "503")
		for _, st := range statuses {
			for _, e := range errorResponses {
				if e.status == st {
					resp.set(st, o("$ref", "#/components/responses/"+e.name))
				}
			}
		}
		out.set("responses", resp)
		return out
	}
	for _, st := range x.errs {
		for _, e := range errorResponses {
			if e.status == st {
				resp.set(st, o("$ref", "#/components/responses/"+e.name))
			}
		}
	}
	out.set("responses", resp)
	out.set("security", []any{})
	return out
}

// crud is which generic operations a collection offers.
type crud struct {
	update     bool   // PUT and PATCH
	noCreate   bool   // no POST: a module writes the resources
	listParams []any  // parameters of the list operation
	extra      []any  // parameters of every operation (the ?regionId scope)
	scope      []any  // path parameters before {resourceId}
	idSuffix   string // appended to operationIds, to tell aliases apart
	alias      bool   // the collection repeats another under a second path
	primary    string // idSuffix of the collection this one repeats
}

var pageParams = []any{pref("pageSize"), pref("offset")}
var queryParams = []any{pref("orderBy"), pref("filter"), pref("pageSize"), pref("offset")}

func plural(noun string) string {
	if base, ok := strings.CutSuffix(noun, "y"); ok {
		return base + "ies"
	}
	return noun + "s"
}

// a puts the indefinite article before noun.
func a(noun string) string {
	if strings.ContainsAny(noun[:1], "aeiouAEIO") {
		return "an " + noun
	}
	return "a " + noun
}

// camel turns "single schedule" into "SingleSchedule".
func camel(noun string) string {
	var b strings.Builder
	for _, w := range strings.Fields(noun) {
		if w == "OS" {
			b.WriteString("OS")
			continue
		}
		b.WriteString(strings.ToUpper(w[:1]) + w[1:])
	}
	return b.String()
}

// addCRUD adds list, create, get, [replace, update], delete for kind k.
func (ps *pathSet) addCRUD(k eim.Kind, base, tag string, c crud) {
	ps.addCRUDOf(docOf(k), base, tag, c)
}

// addCRUDOf adds list, create, get, [replace, update], delete for a
// resource type.
func (ps *pathSet) addCRUDOf(rd resourceDoc, base, tag string, c crud) {
	k := rd.kind
	noun, name := rd.noun, camel(rd.noun)
	schema := ref(rd.name)
	id := func(verb, n string) string { return verb + n + c.idSuffix }
	alias := func(verb, n string) string {
		if !c.alias {
			return ""
		}
		return verb + n + c.primary
	}
	scoped := func(ps ...[]any) []any {
		var out []any
		out = append(out, c.scope...)
		for _, p := range ps {
			out = append(out, p...)
		}
		return append(out, c.extra...)
	}
	idp := []any{idParamOf(rd)}
	collection := []op{
		{method: "get", id: id("list", plural(name)), tag: tag, summary: "List " + plural(noun),
			desc:   "Returns one page of the project's " + plural(noun) + ", with the referenced resources expanded.",
			params: scoped(c.listParams), ok: okJSON("A page of "+plural(noun)+".", ref(listName(rd))),
			alias: alias("list", plural(name))},
	}
	if !c.noCreate {
		collection = append(collection, op{method: "post", id: id("create", name), tag: tag, summary: "Create " + a(noun),
			desc:   "Creates " + a(noun) + " from the writable fields of the body; read-only fields are ignored. Answers 200 (not 201) with the new " + noun + ".",
			params: scoped(), body: schema, ok: okJSON("The created "+noun+".", schema), write: true,
			alias: alias("create", name)})
	}
	ps.add(base, collection...)
	item := []op{
		{method: "get", id: id("get", name), tag: tag, summary: "Get " + a(noun),
			params: scoped(idp), ok: okJSON("The "+noun+".", schema), alias: alias("get", name)},
	}
	if c.update {
		item = append(item,
			op{method: "put", id: id("replace", name), tag: tag, summary: "Replace " + a(noun),
				desc:   "Sets every writable field from the body; writable fields left out are reset to their zero value.",
				params: scoped(idp), body: schema, ok: okJSON("The "+noun+" after the change.", schema), write: true,
				alias: alias("replace", name)},
			op{method: "patch", id: id("update", name), tag: tag, summary: "Update fields of " + a(noun),
				desc:   "Changes the writable fields named by fieldMask, or, without it, those present in the body.",
				params: scoped(idp, []any{pref("fieldMask")}), body: schema, ok: okJSON("The "+noun+" after the change.", schema), write: true,
				alias: alias("update", name)},
		)
	}
	deleteDesc := "Deletes the " + noun + "."
	switch k {
	case eim.KindHost, eim.KindInstance:
		deleteDesc = "Sets the desired state to DELETED; the managers clean up and then remove the " + noun +
			". A host that still has an instance is not removed until the instance is."
	case eim.KindRegion:
		deleteDesc = "Deletes the region; a region with sites or child regions is answered with 400."
	case eim.KindOS:
		deleteDesc = "Deletes the OS profile; one that an instance uses is answered with 400."
	case eim.KindTelemetryGroup:
		deleteDesc = "Deletes the group; one that a profile uses is answered with 400 (FailedPrecondition)."
	case eim.KindOSUpdatePolicy:
		deleteDesc = "Deletes the policy; one that an instance names, or that an OS update run applied, is answered with 400 (FailedPrecondition)."
	case eim.KindOSUpdateRun:
		deleteDesc = "Deletes the record of the update (not the update itself)."
	}
	item = append(item, op{method: "delete", id: id("delete", name), tag: tag, summary: "Delete " + a(noun),
		desc: deleteDesc, params: scoped(idp), ok: o("$ref", "#/components/responses/Deleted"), write: true,
		alias: alias("delete", name)})
	ps.add(base+"/{resourceId}", item...)
}
