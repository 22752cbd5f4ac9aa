package oscatalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/eimhq/eim"
)

// Profile is one OS profile manifest, decoded and checked: what an OS
// resource of the catalog is made from. Its fields are those of the
// manifest (see docs/os-profiles.md).
type Profile struct {
	// Source names the file the profile came from: a path for a user's
	// manifest, "shipped:NAME" for one built into EIM.
	Source string
	// Release is metadata.release, the profile's own version; the OS
	// resource's profileVersion (the image version when it is empty).
	Release string

	Name            string
	Type            eim.OsType
	Provider        eim.OsProviderKind
	Architecture    string
	ProfileName     string
	ImageURL        string
	ImageSha256     string
	ImageVersion    string
	SecurityFeature eim.SecurityFeature
	// PackageManifestURL is where the list of the image's packages is
	// published; InstalledPackages that list itself (JSON), when the
	// manifest carries it.
	PackageManifestURL string
	InstalledPackages  string
	// PlatformBundle is the manifest's platformBundle mapping as a JSON
	// object, "" when it has none.
	PlatformBundle  string
	Description     string
	ExistingCvesURL string
	FixedCvesURL    string
	TLSCaCert       string
}

// Key identifies a profile: the family (profileName) and the image
// version. A user's manifest with the key of a shipped one replaces it,
// and the catalog finds its OS resource in a project by it.
type Key struct {
	ProfileName string
	Version     string
}

func (k Key) String() string { return k.ProfileName + " " + k.Version }

// Key returns the profile's key.
func (p *Profile) Key() Key { return Key{p.ProfileName, p.ImageVersion} }

// ProfileVersion is the OS resource's profileVersion: metadata.release, or
// the image version when the manifest names no release.
func (p *Profile) ProfileVersion() string {
	if p.Release != "" {
		return p.Release
	}
	return p.ImageVersion
}

// OS returns the OS resource the profile describes (no ID, no project).
func (p *Profile) OS() *eim.OS {
	o := &eim.OS{}
	p.apply(o)
	return o
}

// apply sets the fields of o that the profile owns and reports whether
// any changed. Fields no manifest sets (metadata, repoUrl, the CVE lists)
// are left as they are.
func (p *Profile) apply(o *eim.OS) (changed bool) {
	set := func(dst *string, v string) {
		if *dst != v {
			*dst, changed = v, true
		}
	}
	set(&o.Name, p.Name)
	set(&o.Architecture, p.Architecture)
	set(&o.ImageURL, p.ImageURL)
	set(&o.ImageID, p.ImageVersion)
	set(&o.Description, p.Description)
	set(&o.Sha256, p.ImageSha256)
	set(&o.ProfileName, p.ProfileName)
	set(&o.ProfileVersion, p.ProfileVersion())
	set(&o.InstalledPackages, p.InstalledPackages)
	set(&o.InstalledPackagesURL, p.PackageManifestURL)
	set(&o.PlatformBundle, p.PlatformBundle)
	set(&o.TLSCaCert, p.TLSCaCert)
	set(&o.ExistingCvesURL, p.ExistingCvesURL)
	set(&o.FixedCvesURL, p.FixedCvesURL)
	if o.SecurityFeature != p.SecurityFeature {
		o.SecurityFeature, changed = p.SecurityFeature, true
	}
	if o.OsType != p.Type {
		o.OsType, changed = p.Type, true
	}
	if o.OsProvider != p.Provider {
		o.OsProvider, changed = p.Provider, true
	}
	return changed
}

// ManifestError is what is wrong with a manifest: its file, the field (a
// dotted path such as spec.osImageSha256) and the line, when known.
type ManifestError struct {
	Source string
	Field  string
	Line   int
	Msg    string
}

func (e *ManifestError) Error() string {
	var b strings.Builder
	b.WriteString("os profile ")
	b.WriteString(e.Source)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// The manifest format's limits.
const (
	// MaxManifestSize bounds a manifest file (an inline package list
	// makes the largest).
	MaxManifestSize = 1 << 20
	// AppVersion is the one format version there is (the original's).
	AppVersion = "apps/v1"

	maxInstalledPackages = 500000 // the OS resource's limit
	maxVersion           = 128
)

var (
	reProfileName = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,126}[a-z0-9])?$`)
	reVersion     = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z._+~-]*$`)
	reSha256      = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// Parse decodes and checks one manifest. Unknown fields, missing required
// ones and bad values are a *ManifestError naming source and the field.
func Parse(source string, data []byte) (*Profile, error) {
	if len(data) > MaxManifestSize {
		return nil, &ManifestError{Source: source, Msg: fmt.Sprintf("is %d bytes, at most %d allowed", len(data), MaxManifestSize)}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &ManifestError{Source: source, Msg: "is empty"}
		}
		return nil, &ManifestError{Source: source, Msg: err.Error()}
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		line := 0
		if err == nil {
			line = more.Line
		}
		return nil, &ManifestError{Source: source, Line: line, Msg: "holds more than one YAML document; write one profile per file"}
	}
	d := &decoder{source: source, lines: map[string]int{}}
	p := &Profile{Source: source}
	if err := d.decode(&doc, p); err != nil {
		return nil, err
	}
	if err := d.check(p); err != nil {
		return nil, err
	}
	return p, nil
}

// decoder walks a manifest's YAML nodes. Walking nodes, rather than
// unmarshalling into structs, keeps scalars as written (a version such as
// 22.04 is not a float), finds duplicate keys, and names each bad field
// with its line.
type decoder struct {
	source string
	lines  map[string]int // field path → line, for later checks
}

func (d *decoder) fail(field string, n *yaml.Node, format string, args ...any) error {
	line := 0
	if n != nil {
		line = n.Line
	} else if field != "" {
		line = d.lines[field]
	}
	return &ManifestError{Source: d.source, Field: field, Line: line, Msg: fmt.Sprintf(format, args...)}
}

// scalar returns the text of a scalar node as written; null is "".
func (d *decoder) scalar(field string, n *yaml.Node) (string, error) {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "", nil
		}
		return n.Value, nil
	case yaml.AliasNode:
		return "", d.fail(field, n, "aliases are not supported")
	case yaml.MappingNode:
		return "", d.fail(field, n, "want a string, got a mapping")
	case yaml.SequenceNode:
		return "", d.fail(field, n, "want a string, got a list")
	}
	return "", d.fail(field, n, "want a string")
}

// mapping calls fn for each key of a mapping node, in order. Keys must be
// unique strings and among known; an empty (null) node is an empty
// mapping.
func (d *decoder) mapping(path string, n *yaml.Node, known []string, fn func(key string, v *yaml.Node) error) error {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		what := "a string"
		switch n.Kind {
		case yaml.SequenceNode:
			what = "a list"
		case yaml.AliasNode:
			return d.fail(path, n, "aliases are not supported")
		}
		if path == "" {
			return d.fail("", n, "want a mapping with appVersion, metadata and spec, got %s", what)
		}
		return d.fail(path, n, "want a mapping, got %s", what)
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		if kn.Kind != yaml.ScalarNode || kn.Tag == "!!merge" {
			return d.fail(path, kn, "keys must be plain strings")
		}
		key := kn.Value
		field := join(path, key)
		if seen[key] {
			return d.fail(field, kn, "appears more than once")
		}
		seen[key] = true
		if known != nil && !slices.Contains(known, key) {
			return d.fail(field, kn, "unknown field%s", suggest(key, known))
		}
		d.lines[field] = kn.Line
		if err := fn(key, vn); err != nil {
			return err
		}
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// suggest names a known field that key was probably meant to be: the
// same but for case or an "os" prefix, or a typo away (edit distance at
// most 2).
func suggest(key string, known []string) string {
	norm := func(s string) string {
		s = strings.ToLower(s)
		return strings.TrimPrefix(s, "os")
	}
	best, bestDist := "", 3
	for _, k := range known {
		d := distance(norm(k), norm(key))
		if d < bestDist {
			best, bestDist = k, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s?)", best)
}

// distance is the Levenshtein distance of a and b (bytes), or 3 when it
// is more than 2 or the strings are long.
func distance(a, b string) int {
	if len(a) > 64 || len(b) > 64 || len(a)-len(b) > 2 || len(b)-len(a) > 2 {
		return 3
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return min(prev[len(b)], 3)
}

// The manifest's fields, in the order of the format's documentation.
var (
	topFields      = []string{"appVersion", "metadata", "spec"}
	metadataFields = []string{"release", "version"}
	specFields     = []string{
		"name", "type", "provider", "architecture", "profileName",
		"osImageUrl", "osImageSha256", "osImageVersion", "securityFeature",
		"osPackageManifestURL", "installedPackages", "platformBundle",
		"description", "osExistingCvesURL", "osFixedCvesURL", "tlsCaCert",
	}
	requiredSpec = []string{"name", "type", "profileName", "osImageUrl", "osImageSha256", "osImageVersion"}
)

func (d *decoder) decode(doc *yaml.Node, p *Profile) error {
	root := doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return d.fail("", nil, "is empty")
		}
		root = root.Content[0]
	}
	var (
		appVersion string
		spec       *yaml.Node
	)
	err := d.mapping("", root, topFields, func(key string, v *yaml.Node) error {
		switch key {
		case "appVersion":
			s, err := d.scalar(key, v)
			if err != nil {
				return err
			}
			appVersion = s
			if s != AppVersion {
				return d.fail(key, v, "%q is not %s, the version of this format", s, AppVersion)
			}
			return nil
		case "metadata":
			return d.mapping(key, v, metadataFields, func(mk string, mv *yaml.Node) error {
				s, err := d.scalar(join(key, mk), mv)
				if err != nil {
					return err
				}
				if mk == "release" {
					p.Release = s
				}
				return nil
			})
		default: // spec, read once the format's version is known
			spec = v
			return nil
		}
	})
	if err != nil {
		return err
	}
	if appVersion == "" {
		return d.fail("appVersion", nil, "is required (%s)", AppVersion)
	}
	if spec == nil {
		return d.fail("spec", nil, "is required")
	}
	return d.spec(spec, p)
}

func (d *decoder) spec(n *yaml.Node, p *Profile) error {
	strs := map[string]*string{
		"name": &p.Name, "architecture": &p.Architecture, "profileName": &p.ProfileName,
		"osImageUrl": &p.ImageURL, "osImageSha256": &p.ImageSha256, "osImageVersion": &p.ImageVersion,
		"osPackageManifestURL": &p.PackageManifestURL, "installedPackages": &p.InstalledPackages,
		"description": &p.Description, "osExistingCvesURL": &p.ExistingCvesURL, "osFixedCvesURL": &p.FixedCvesURL,
		"tlsCaCert": &p.TLSCaCert,
	}
	var typ, provider, security string
	strs["type"], strs["provider"], strs["securityFeature"] = &typ, &provider, &security
	err := d.mapping("spec", n, specFields, func(key string, v *yaml.Node) error {
		field := "spec." + key
		if key == "platformBundle" {
			return d.platformBundle(field, v, p)
		}
		s, err := d.scalar(field, v)
		if err != nil {
			return err
		}
		*strs[key] = s
		return nil
	})
	if err != nil {
		return err
	}
	for _, f := range requiredSpec {
		if *strs[f] == "" {
			line := d.lines["spec."+f]
			if line == 0 {
				line = d.lines["spec"]
			}
			return &ManifestError{Source: d.source, Field: "spec." + f, Line: line, Msg: "is required"}
		}
	}
	var err2 error
	if p.Type, err2 = enumOf[eim.OsType](d, "spec.type", typ, ""); err2 != nil {
		return err2
	}
	if p.Provider, err2 = enumOf[eim.OsProviderKind](d, "spec.provider", provider, "OS_PROVIDER_KIND_INFRA"); err2 != nil {
		return err2
	}
	if p.SecurityFeature, err2 = enumOf[eim.SecurityFeature](d, "spec.securityFeature", security, "SECURITY_FEATURE_NONE"); err2 != nil {
		return err2
	}
	return nil
}

// enumOf checks an enum field's value: one of its names other than
// UNSPECIFIED; def when empty.
func enumOf[T interface {
	~string
	Values() []string
}](d *decoder, field, s, def string) (T, error) {
	var zero T
	if s == "" {
		s = def
	}
	names := zero.Values()[1:] // [0] is …_UNSPECIFIED
	if !slices.Contains(names, s) {
		return zero, d.fail(field, nil, "%q is not one of %s", s, strings.Join(names, ", "))
	}
	return T(s), nil
}

// platformBundle takes an opaque mapping of names to strings (the
// original's installerScript, cloudInitScript …) and keeps it as JSON.
func (d *decoder) platformBundle(field string, n *yaml.Node, p *Profile) error {
	m := map[string]string{}
	err := d.mapping(field, n, nil, func(key string, v *yaml.Node) error {
		s, err := d.scalar(join(field, key), v)
		if err != nil {
			return err
		}
		m[key] = s
		return nil
	})
	if err != nil {
		return err
	}
	if len(m) == 0 {
		return nil
	}
	b, err := json.Marshal(m) // keys sorted: the same bundle is the same text
	if err != nil {
		return d.fail(field, n, "%v", err)
	}
	p.PlatformBundle = string(b)
	return nil
}

// specNames maps the OS resource's fields (as eim.Validate names them) to
// the manifest's.
var specNames = map[string]string{
	"name": "spec.name", "architecture": "spec.architecture", "imageUrl": "spec.osImageUrl",
	"imageId": "spec.osImageVersion", "description": "spec.description", "sha256": "spec.osImageSha256",
	"profileName": "spec.profileName", "installedPackagesUrl": "spec.osPackageManifestURL",
	"tlsCaCert": "spec.tlsCaCert", "existingCvesUrl": "spec.osExistingCvesURL", "fixedCvesUrl": "spec.osFixedCvesURL",
	"securityFeature": "spec.securityFeature", "osType": "spec.type", "osProvider": "spec.provider",
}

// check applies the format's own rules, then the OS resource's.
func (d *decoder) check(p *Profile) error {
	if !reProfileName.MatchString(p.ProfileName) {
		return d.fail("spec.profileName", nil, "%q: want lowercase letters, digits, '.', '_' and '-', starting and ending with a letter or digit, at most 128", p.ProfileName)
	}
	if len(p.ImageVersion) > maxVersion || !reVersion.MatchString(p.ImageVersion) {
		return d.fail("spec.osImageVersion", nil, "%q: want a version such as 3.0.20250717.0718 (letters, digits and . _ + ~ -, at most %d)", p.ImageVersion, maxVersion)
	}
	if p.Release != "" && (len(p.Release) > maxVersion || !reVersion.MatchString(p.Release)) {
		return d.fail("metadata.release", nil, "%q: want a version such as 1.2.0 (letters, digits and . _ + ~ -, at most %d)", p.Release, maxVersion)
	}
	if !reSha256.MatchString(p.ImageSha256) {
		return d.fail("spec.osImageSha256", nil, "%q: want the image's SHA-256, 64 lowercase hex digits", p.ImageSha256)
	}
	urls := []struct {
		field string
		v     string
	}{
		{"spec.osImageUrl", p.ImageURL}, {"spec.osPackageManifestURL", p.PackageManifestURL},
		{"spec.osExistingCvesURL", p.ExistingCvesURL}, {"spec.osFixedCvesURL", p.FixedCvesURL},
	}
	for _, u := range urls {
		if u.v == "" {
			continue
		}
		if pu, err := url.Parse(u.v); err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			return d.fail(u.field, nil, "%q: want an absolute http(s) URL", u.v)
		}
	}
	if p.InstalledPackages != "" {
		if len(p.InstalledPackages) > maxInstalledPackages {
			return d.fail("spec.installedPackages", nil, "is %d characters long, at most %d allowed", len(p.InstalledPackages), maxInstalledPackages)
		}
		if !json.Valid([]byte(p.InstalledPackages)) {
			return d.fail("spec.installedPackages", nil, "want the package list as JSON (e.g. {\"repo\":[{\"name\":\"…\",\"version\":\"…\"}]})")
		}
	}
	if err := eim.Validate(p.OS()); err != nil {
		msg := eim.ErrorMessage(err)
		field, rest, ok := strings.Cut(msg, ": ")
		if name, known := specNames[field]; ok && known {
			return d.fail(name, nil, "%s", rest)
		}
		return d.fail("spec", nil, "%s", msg)
	}
	return nil
}
