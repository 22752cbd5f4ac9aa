package spec

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/eimhq/eim"
)

// Value types are the structs nested in a resource that are not resource
// kinds themselves: a host's disks, interfaces, USB devices and GPUs, an
// interface's addresses and link state. Each becomes one component schema,
// built from its json-tagged fields the way encoding/json writes them; a
// field is read-only unless tagged eim:"w", as in the resources. What the
// Go types cannot say (the component's name and the descriptions) is in
// valueDocs.

// valueDoc names a value type's component and describes it and its fields.
type valueDoc struct {
	name   string          // component name, as the original API names it
	desc   string          // what the value is
	fields map[string]rule // by JSON name; every field needs a desc
}

// childTimestamps describes the timestamps of a host's hardware children.
const childTimestamps = "When the node first reported the device and when any of its fields last changed."

// valueDocs holds every value type the resources use.
var valueDocs = map[reflect.Type]valueDoc{
	reflect.TypeFor[eim.HostStorage](): {"HoststorageResource", "A storage device of a host, as its node reports it.", map[string]rule{
		"wwid":          {desc: "World Wide Identifier of the device."},
		"serial":        {desc: "Serial number of the device."},
		"vendor":        {desc: "Maker of the device."},
		"model":         {desc: "Model of the device."},
		"capacityBytes": {desc: "Size of the device in bytes, as a decimal string (64-bit)."},
		"deviceName":    {desc: "Name the OS gives the device, e.g. sda or nvme0n1."},
		"timestamps":    {desc: childTimestamps},
	}},
	reflect.TypeFor[eim.HostNic](): {"HostnicResource", "A network interface of a host, as its node reports it.", map[string]rule{
		"deviceName":    {desc: "Name the OS gives the interface, e.g. eth0 or enp1s0."},
		"pciIdentifier": {desc: "PCI address of the interface."},
		"macAddr":       {desc: "MAC address of the interface."},
		"sriovEnabled":  {desc: "Whether SR-IOV is enabled on the interface."},
		"sriovVfsNum":   {desc: "Number of SR-IOV virtual functions configured now; 0 without SR-IOV."},
		"sriovVfsTotal": {desc: "Largest number of SR-IOV virtual functions the interface supports; 0 without SR-IOV."},
		"mtu":           {desc: "Largest packet the interface sends, in bytes (MTU)."},
		"linkState":     {desc: "Whether the link is up, and since when."},
		"bmcInterface":  {desc: "Whether the interface belongs to the baseboard management controller."},
		"ipaddresses":   {desc: "The addresses configured on the interface."},
		"timestamps":    {desc: childTimestamps},
	}},
	reflect.TypeFor[eim.NicLinkState](): {"NetworkInterfaceLinkState", "The link state of an interface and when it last changed.", map[string]rule{
		"type":       {desc: "Up or down."},
		"timestamps": {desc: "When the node first reported a link state and when the state last changed."},
	}},
	reflect.TypeFor[eim.IPAddress](): {"IPAddressResource", "An address configured on a host's network interface.", map[string]rule{
		"resourceId": {desc: "ID of the address, assigned by the system; it stays the same for as long as the interface reports the address.",
			maxLength: idMaxLength(eim.KindIPAddress), pattern: idPattern(eim.KindIPAddress)},
		"address":      {desc: "The address and its prefix length (CIDR), e.g. 192.0.2.10/24."},
		"status":       {desc: "Whether the address is in use."},
		"statusDetail": {desc: "Status text for people."},
		"configMethod": {desc: "Whether the address was set statically or obtained dynamically (DHCP)."},
		"timestamps":   {desc: "When the node first reported the address and when any of its fields last changed."},
	}},
	reflect.TypeFor[eim.HostUsb](): {"HostusbResource", "A USB device attached to a host, as its node reports it.", map[string]rule{
		"idVendor":   {desc: "USB vendor ID, in hexadecimal."},
		"idProduct":  {desc: "USB product ID, in hexadecimal."},
		"bus":        {desc: "Number of the USB bus the device is on."},
		"addr":       {desc: "Number of the device on its bus, assigned by the OS."},
		"class":      {desc: "Device class, as the USB-IF defines them."},
		"serial":     {desc: "Serial number of the device."},
		"deviceName": {desc: "Name the OS gives the device."},
		"timestamps": {desc: childTimestamps},
	}},
	reflect.TypeFor[eim.HostGpu](): {"HostgpuResource", "A GPU of a host, as its node reports it.", map[string]rule{
		"pciId":        {desc: "PCI address of the GPU."},
		"product":      {desc: "Model of the GPU."},
		"vendor":       {desc: "Maker of the GPU."},
		"description":  {desc: "The GPU described for people."},
		"deviceName":   {desc: "Name the OS gives the GPU."},
		"capabilities": {desc: "Features the GPU reports, one per item."},
		"timestamps":   {desc: childTimestamps},
	}},
}

func valueDocOf(t reflect.Type) valueDoc {
	vd, ok := valueDocs[t]
	if !ok {
		panic(fmt.Sprintf("spec: struct %v is neither a resource nor a value type with a valueDoc", t))
	}
	return vd
}

// valueRef points p at the component of value type t, noting that the
// component must be written.
func (b *schemaBuilder) valueRef(p *obj, t reflect.Type) {
	b.values[t] = true
	p.set("$ref", "#/components/schemas/"+valueDocOf(t).name)
}

// valueSchemas writes the component of every value type referenced so
// far, and of those they reference, sorted by name.
func (b *schemaBuilder) valueSchemas(into *obj) {
	built := map[string]*obj{}
	byName := map[string]reflect.Type{}
	for {
		var next reflect.Type
		for t := range b.values {
			if _, ok := built[valueDocOf(t).name]; !ok {
				next = t
				break
			}
		}
		if next == nil {
			break
		}
		name := valueDocOf(next).name
		if prev, dup := byName[name]; dup {
			panic(fmt.Sprintf("spec: %v and %v are both named %s", prev, next, name))
		}
		if _, dup := into.get(name); dup {
			panic("spec: value type " + next.String() + " is named " + name + ", as another component")
		}
		byName[name] = next
		built[name] = b.valueSchema(next)
	}
	names := make([]string, 0, len(built))
	for n := range built {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		into.set(n, built[n])
	}
}

var marshaler = reflect.TypeFor[json.Marshaler]()

// valueSchema builds the component of value type t from its fields.
func (b *schemaBuilder) valueSchema(t reflect.Type) *obj {
	if t.Implements(marshaler) || reflect.PointerTo(t).Implements(marshaler) {
		// Its wire form is not its fields; it needs a hand-written schema.
		panic(fmt.Sprintf("spec: value type %v marshals itself", t))
	}
	vd := valueDocOf(t)
	props := o()
	for _, f := range wireFields(t) {
		r, ok := vd.fields[f.name]
		if !ok || r.desc == "" {
			panic(fmt.Sprintf("spec: field %s of %s has no description", f.name, vd.name))
		}
		p := o()
		b.typeOf(p, f.Type, slices.Contains(f.opts, "string"))
		if !f.writable {
			p.set("readOnly", true)
		}
		applyRule(p, r)
		props.set(f.name, p)
	}
	for name := range vd.fields {
		if _, ok := props.get(name); !ok {
			panic(fmt.Sprintf("spec: %s has a rule for %s, which %v does not have", vd.name, name, t))
		}
	}
	return o("type", "object", "description", vd.desc, "properties", props)
}

// wireField is a struct field as encoding/json writes it.
type wireField struct {
	reflect.StructField
	name     string   // JSON name
	opts     []string // the json tag's options ("string", "omitempty")
	writable bool     // tagged eim:"w"
}

// wireFields lists the fields of struct t that encoding/json writes, in
// order, with embedded structs flattened.
func wireFields(t reflect.Type) []wireField {
	var out []wireField
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := strings.Split(sf.Tag.Get("json"), ",")
		name, opts := tag[0], tag[1:]
		switch {
		case name == "-" && len(opts) == 0:
			continue
		case sf.Anonymous && name == "" && sf.Type.Kind() == reflect.Struct:
			out = append(out, wireFields(sf.Type)...)
			continue
		case !sf.IsExported():
			continue
		case name == "":
			name = sf.Name
		}
		for _, f := range out {
			if f.name == name {
				panic(fmt.Sprintf("spec: %v has two fields named %s", t, name))
			}
		}
		writable := slices.Contains(strings.Split(sf.Tag.Get("eim"), ","), "w")
		out = append(out, wireField{StructField: sf, name: name, opts: opts, writable: writable})
	}
	return out
}
