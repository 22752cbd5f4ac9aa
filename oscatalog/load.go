package oscatalog

import (
	"cmp"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

//go:embed profiles/*.yaml
var shipped embed.FS

// Shipped returns the manifests built into EIM.
func Shipped() fs.FS {
	sub, err := fs.Sub(shipped, "profiles")
	if err != nil {
		panic(err) // the directory is embedded: cannot happen
	}
	return sub
}

// Catalog is a set of profiles: at most one per key (profile name and
// image version) and per OS name (names are unique within a project), and
// one OS type per profile name.
type Catalog struct {
	profiles []*Profile // by profile name, then version
	byKey    map[Key]*Profile
	// Overrides lists the user's manifests that replaced shipped ones.
	Overrides []Override
	digest    string
}

// Override is a user's manifest that replaced a shipped one.
type Override struct {
	Key            Key
	Shipped, Local string // the two sources
}

// Profiles returns the catalog's profiles, ordered by profile name and
// then version (oldest first). The caller must not change them.
func (c *Catalog) Profiles() []*Profile { return c.profiles }

// Lookup returns the profile with the key, or nil.
func (c *Catalog) Lookup(k Key) *Profile { return c.byKey[k] }

// Digest identifies the catalog's content: two catalogs with the same
// digest make the same OS resources.
func (c *Catalog) Digest() string { return c.digest }

// Load reads the manifests of shipped (every *.yaml file) and of dir
// (every *.yaml and *.yml file directly in it, skipping hidden ones; ""
// for none). A manifest of dir with the key of a shipped one replaces it.
// Any bad manifest, two manifests of one source with the same key, two
// profiles with the same OS name, or one profile name with two OS types
// is an error naming the files.
func Load(shippedFS fs.FS, dir string) (*Catalog, error) {
	base, err := readFS(shippedFS, "shipped:")
	if err != nil {
		return nil, err
	}
	var local []*Profile
	if dir != "" {
		if local, err = readDir(dir); err != nil {
			return nil, err
		}
	}
	c := &Catalog{byKey: map[Key]*Profile{}}
	for _, p := range base {
		if q := c.byKey[p.Key()]; q != nil {
			return nil, fmt.Errorf("os profiles %s and %s: both are %s", q.Source, p.Source, p.Key())
		}
		c.byKey[p.Key()] = p
	}
	seen := map[Key]*Profile{}
	for _, p := range local {
		if q := seen[p.Key()]; q != nil {
			return nil, fmt.Errorf("os profiles %s and %s: both are %s", q.Source, p.Source, p.Key())
		}
		seen[p.Key()] = p
		if q := c.byKey[p.Key()]; q != nil {
			c.Overrides = append(c.Overrides, Override{Key: p.Key(), Shipped: q.Source, Local: p.Source})
		}
		c.byKey[p.Key()] = p
	}
	for _, p := range c.byKey {
		c.profiles = append(c.profiles, p)
	}
	slices.SortFunc(c.profiles, func(a, b *Profile) int {
		return cmp.Or(strings.Compare(a.ProfileName, b.ProfileName), CompareVersions(a.ImageVersion, b.ImageVersion),
			strings.Compare(a.ImageVersion, b.ImageVersion))
	})
	names := map[string]*Profile{}
	types := map[string]*Profile{}
	for _, p := range c.profiles {
		if q := names[p.Name]; q != nil {
			return nil, fmt.Errorf("os profiles %s and %s: both are named %q (OS names are unique within a project)", q.Source, p.Source, p.Name)
		}
		names[p.Name] = p
		if q := types[p.ProfileName]; q != nil && q.Type != p.Type {
			return nil, fmt.Errorf("os profiles %s and %s: profile %s is %s in one and %s in the other", q.Source, p.Source, p.ProfileName, q.Type, p.Type)
		}
		types[p.ProfileName] = p
	}
	if err := c.computeDigest(); err != nil {
		return nil, err
	}
	return c, nil
}

// computeDigest sets c.digest from the OS resources of its profiles.
func (c *Catalog) computeDigest() error {
	h := sha256.New()
	for _, p := range c.profiles {
		b, err := json.Marshal(p.OS())
		if err != nil {
			return fmt.Errorf("os profile %s: %w", p.Source, err)
		}
		h.Write(append(b, '\n'))
	}
	c.digest = hex.EncodeToString(h.Sum(nil))
	return nil
}

// readFS parses every *.yaml file of fsys, in name order.
func readFS(fsys fs.FS, prefix string) ([]*Profile, error) {
	names, err := fs.Glob(fsys, "*.yaml")
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	var out []*Profile
	for _, n := range names {
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, fmt.Errorf("os profile %s%s: %w", prefix, n, err)
		}
		p, err := Parse(prefix+n, b)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// readDir parses the manifests directly in dir, in name order.
func readDir(dir string) ([]*Profile, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("os profiles: %w", err)
	}
	var out []*Profile
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, ".") || (!strings.HasSuffix(n, ".yaml") && !strings.HasSuffix(n, ".yml")) {
			continue
		}
		path := filepath.Join(dir, n)
		info, err := os.Stat(path) // follows links: a linked manifest counts
		if err != nil {
			return nil, fmt.Errorf("os profile %s: %w", path, err)
		}
		if !info.Mode().IsRegular() {
			continue
		}
		b, err := readLimited(path)
		if err != nil {
			return nil, err
		}
		p, err := Parse(path, b)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// readLimited reads a file of at most MaxManifestSize bytes (one more is
// read, so that Parse reports the size).
func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("os profile %s: %w", path, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxManifestSize+1))
	if err != nil {
		return nil, fmt.Errorf("os profile %s: %w", path, err)
	}
	return b, nil
}
