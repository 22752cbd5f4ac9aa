// Package sim runs a fleet of simulated nodes in one process: each node has
// its own identity and goes through the same southbound calls as a real one
// (agent.Provisioner, then node mode), with simulated actions that touch no
// disk. It is eim-agent's "simulate" command, the Day-0 benchmark and the
// load generator of later issues.
package sim

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"regexp"
	"strings"
)

// Identity is what a simulated node presents to Discover.
type Identity struct {
	UUID     string
	Serial   string
	Hostname string
	MAC      string
	Addr     string // CIDR form
}

var (
	uuidRE   = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	serialRE = regexp.MustCompile(`^[A-Za-z0-9]{5,20}$`)
)

// Generate returns n distinct identities derived from seed: random version-4
// UUIDs, serials "SIM" + 12 upper-case hex digits, hostnames sim-00001 …,
// locally administered MACs and addresses in 10.0.0.0/8.
func Generate(n int, seed uint64) []Identity {
	r := rand.New(rand.NewPCG(seed, 0x5eed_e1a0))
	ids := make([]Identity, 0, n)
	seenU := make(map[string]bool, n)
	seenS := make(map[string]bool, n)
	for len(ids) < n {
		var b [16]byte
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		b[6] = b[6]&0x0f | 0x40 // version 4
		b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
		u := fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
		s := fmt.Sprintf("SIM%012X", r.Uint64()&(1<<48-1))
		if seenU[u] || seenS[s] {
			continue
		}
		seenU[u], seenS[s] = true, true
		ids = append(ids, fill(Identity{UUID: u, Serial: s}, len(ids)))
	}
	return ids
}

// fill gives identity i of a fleet the fields a CSV does not carry.
func fill(id Identity, i int) Identity {
	n := i + 1
	if id.Hostname == "" {
		id.Hostname = fmt.Sprintf("sim-%05d", n)
	}
	if id.MAC == "" {
		id.MAC = fmt.Sprintf("02:5e:%02x:%02x:%02x:%02x", byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	if id.Addr == "" {
		id.Addr = fmt.Sprintf("10.%d.%d.%d/8", byte(n>>16), byte(n>>8), byte(n))
	}
	return id
}

// Name gives the identities the hostnames prefix00001, prefix00002 … in
// order (Generate and ReadCSV name them sim-00001 …).
func Name(ids []Identity, prefix string) {
	for i := range ids {
		ids[i].Hostname = fmt.Sprintf("%s%05d", prefix, i+1)
	}
}

// ReadCSV reads identities from lines of "uuid,serial" (either may be empty,
// not both); empty lines and lines starting with # are skipped. A first
// line naming the columns is a header, and then the columns are found by
// name ("uuid" and "serial", in any case and order) and others are
// ignored: the bulk import file of "eim host import"
// (Serial,UUID,OSProfile,Site,…) is read as it is, so a fleet can be
// rehearsed from the file that registered it. UUIDs and serials must be
// well formed and unique within the file.
func ReadCSV(r io.Reader) ([]Identity, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.Comment = '#'
	cr.TrimLeadingSpace = true
	var ids []Identity
	seen := make(map[string]int)
	uuidCol, serialCol, header := 0, 1, false
	for first := true; ; first = false {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("identities: %w", err)
		}
		line, _ := cr.FieldPos(0)
		if first {
			u, sr := -1, -1
			for i, f := range rec {
				switch strings.ToLower(strings.TrimSpace(strings.TrimPrefix(f, "\ufeff"))) {
				case "uuid":
					u = i
				case "serial":
					sr = i
				}
			}
			if u >= 0 || sr >= 0 {
				if u < 0 || sr < 0 {
					return nil, fmt.Errorf("identities line %d: a header needs both a uuid and a serial column", line)
				}
				uuidCol, serialCol, header = u, sr, true
				continue
			}
		}
		if !header && len(rec) > 2 {
			return nil, fmt.Errorf("identities line %d: got %d fields, want uuid,serial", line, len(rec))
		}
		field := func(i int) string {
			if i < len(rec) {
				return strings.TrimSpace(rec[i])
			}
			return ""
		}
		id := Identity{UUID: strings.ToLower(field(uuidCol)), Serial: field(serialCol)}
		switch {
		case id.UUID == "" && id.Serial == "":
			return nil, fmt.Errorf("identities line %d: uuid or serial is required", line)
		case id.UUID != "" && !uuidRE.MatchString(id.UUID):
			return nil, fmt.Errorf("identities line %d: %q is not a UUID", line, id.UUID)
		case id.Serial != "" && !serialRE.MatchString(id.Serial):
			return nil, fmt.Errorf("identities line %d: serial %q is not 5 to 20 letters and digits", line, id.Serial)
		}
		for _, k := range []string{"u:" + id.UUID, "s:" + id.Serial} {
			if len(k) == 2 {
				continue
			}
			if prev, ok := seen[k]; ok {
				return nil, fmt.Errorf("identities line %d: %s repeats line %d", line, k[2:], prev)
			}
			seen[k] = line
		}
		ids = append(ids, fill(id, len(ids)))
	}
	return ids, nil
}

// WriteCSV writes identities as ReadCSV reads them, with a header.
func WriteCSV(w io.Writer, ids []Identity) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"uuid", "serial"}); err != nil {
		return err
	}
	for _, id := range ids {
		if err := cw.Write([]string{id.UUID, id.Serial}); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
