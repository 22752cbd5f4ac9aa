package sqlstore

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/eimhq/eim"
)

// colKind is how a field travels between Go and SQL.
type colKind int

const (
	colString colKind = iota // string and named string enums, TEXT ''
	colEdge                  // a reference: "" ↔ NULL
	colInt                   // signed integers
	colUint                  // unsigned integers (stored signed; ≤ MaxInt64)
	colBool
	colTime // eim.Time as unix milliseconds; zero ↔ 0
	colJSON // slices, structs, maps
)

// column is one stored field of a kind.
type column struct {
	field *eim.Field
	name  string
	kind  colKind
}

// codec maps one kind's struct to its row. It is built once per kind by
// reflection over the schema; per call only field access remains.
type codec struct {
	schema   *eim.Schema
	kind     eim.Kind
	table    string
	cols     []*column // every stored column, in schema order; id and project first ones included
	byColumn map[string]*column
	// The columns written by Update from the resource: all but id,
	// project, created_at and updated_at (a version the store sets: see
	// setUpdatedAt).
	updCols []*column

	selectList string // "t.id, t.project, …"
	// Statements with "?" placeholders, rebound per dialect by sqlFor.
	insert, update, updateScoped, del, delScoped, get, getScoped string
	// updateIf and updateIfScoped are update and updateScoped that write
	// only the version of the row that was read (its updated_at, the last
	// argument; see tx.Update).
	updateIf, updateIfScoped string
	// referrers are the edges of other kinds that point at this kind.
	referrers []*referrer
	// audited are the columns an audit record shows, by their names in
	// the record's order (see createChangesJSON), and auditSize the
	// length of the largest create's changes yet (a buffer's first size).
	audited   []auditedColumn
	auditSize atomic.Int64
}

// referrer is a column of another table that references this kind.
type referrer struct {
	kind    eim.Kind
	table   string
	column  *column
	cascade bool // deleting the target deletes the referrer (with events)
}

var (
	codecsOnce sync.Once
	codecs     map[eim.Kind]*codec
)

// codecOf returns the codec of a registered kind (nil for an unknown kind).
func codecOf(k eim.Kind) *codec {
	codecsOnce.Do(buildCodecs)
	return codecs[k]
}

// cascades lists the references whose target's deletion takes the referrer
// with it: a host's removal is the host manager's last step of a two-phase
// delete, which must not be blocked by maintenance schedules that target
// the host (they mean nothing without it); a workflow is the provisioning
// of one instance on one host and goes with either; telemetry profiles
// targeting an instance go with it, as schedules go with their host; the
// OS update runs of an instance are its history and go with it (and with
// its host); a workload member is an instance's membership and goes with
// it. Every other reference restricts.
var cascades = map[eim.Kind]map[string]bool{
	eim.KindSingleSchedule:   {"target_host_id": true},
	eim.KindRepeatedSchedule: {"target_host_id": true},
	eim.KindWorkflow:         {"instance_id": true, "host_id": true},
	eim.KindTelemetryProfile: {"target_instance": true},
	eim.KindOSUpdateRun:      {"instance_id": true, "host_id": true},
	eim.KindWorkloadMember:   {"instance_id": true},
}

func buildCodecs() {
	codecs = map[eim.Kind]*codec{}
	for _, k := range eim.Kinds() {
		codecs[k] = newCodec(eim.SchemaOf(k))
	}
	for _, k := range eim.Kinds() {
		c := codecs[k]
		for _, col := range c.cols {
			if col.kind == colEdge {
				target := codecs[col.field.Edge.Kind]
				target.referrers = append(target.referrers, &referrer{kind: k, table: c.table, column: col, cascade: cascades[k][col.name]})
			}
		}
	}
}

var timeType = reflect.TypeFor[eim.Time]()

func newCodec(s *eim.Schema) *codec {
	c := &codec{schema: s, kind: s.Kind, table: s.Table, byColumn: map[string]*column{}}
	for _, f := range s.Fields {
		if !f.Stored() {
			continue
		}
		col := &column{field: f, name: f.Column}
		switch {
		case f.Edge != nil:
			col.kind = colEdge
		case f.Type == timeType:
			col.kind = colTime
		default:
			switch f.Type.Kind() {
			case reflect.String:
				col.kind = colString
			case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
				col.kind = colInt
			case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
				col.kind = colUint
			case reflect.Bool:
				col.kind = colBool
			default:
				col.kind = colJSON
			}
		}
		c.cols = append(c.cols, col)
		c.byColumn[col.name] = col
		switch col.name {
		case "id", "project", "created_at", "updated_at":
		default:
			c.updCols = append(c.updCols, col)
		}
	}
	c.audited = auditedColumns(c.cols)
	names := make([]string, len(c.cols))
	qual := make([]string, len(c.cols))
	marks := make([]string, len(c.cols))
	for i, col := range c.cols {
		names[i] = col.name
		qual[i] = c.table + "." + col.name
		marks[i] = "?"
	}
	sets := make([]string, len(c.updCols), len(c.updCols)+1)
	for i, col := range c.updCols {
		sets[i] = col.name + " = ?"
	}
	sets = append(sets, setUpdatedAt("?", "?"))
	c.selectList = strings.Join(qual, ", ")
	c.insert = fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s) ON CONFLICT (id) DO NOTHING", c.table, strings.Join(names, ", "), strings.Join(marks, ", "))
	c.update = fmt.Sprintf("UPDATE %s SET %s WHERE id = ? %s", c.table, strings.Join(sets, ", "), updateReturning)
	c.updateScoped = fmt.Sprintf("UPDATE %s SET %s WHERE id = ? AND project = ? %s", c.table, strings.Join(sets, ", "), updateReturning)
	c.updateIf = fmt.Sprintf("UPDATE %s SET %s WHERE id = ? AND updated_at = ? %s", c.table, strings.Join(sets, ", "), updateReturning)
	c.updateIfScoped = fmt.Sprintf("UPDATE %s SET %s WHERE id = ? AND project = ? AND updated_at = ? %s", c.table, strings.Join(sets, ", "), updateReturning)
	c.del = fmt.Sprintf("DELETE FROM %s WHERE id = ? RETURNING project", c.table)
	c.delScoped = fmt.Sprintf("DELETE FROM %s WHERE id = ? AND project = ? RETURNING project", c.table)
	c.get = fmt.Sprintf("SELECT %s FROM %s WHERE %s.id = ?", c.selectList, c.table, c.table)
	c.getScoped = fmt.Sprintf("SELECT %s FROM %s WHERE %s.id = ? AND %s.project = ?", c.selectList, c.table, c.table, c.table)
	return c
}

// updateReturning ends every UPDATE of a resource: what the writer learns
// of the stored row (and whether there was one).
const updateReturning = "RETURNING project, created_at, updated_at"

// setUpdatedAt is the assignment of updated_at in an UPDATE, given the
// placeholders of the writer's time (unix milliseconds) twice: that time,
// or one millisecond past the stored one when that is not older. So every
// write gives a row a new updated_at, which writers that name the version
// they read (tx.Update) can tell from the one they read even when two
// writes fall in one millisecond or the writers' clocks differ.
func setUpdatedAt(now1, now2 string) string {
	return "updated_at = CASE WHEN updated_at >= " + now1 + " THEN updated_at + 1 ELSE " + now2 + " END"
}

// value returns the SQL value of one column of r.
func (col *column) value(r eim.Resource) (any, error) {
	v := col.field.Value(r)
	switch col.kind {
	case colString:
		return v.String(), nil
	case colEdge:
		if v.String() == "" {
			return nil, nil
		}
		return v.String(), nil
	case colInt:
		return v.Int(), nil
	case colUint:
		u := v.Uint()
		if u > math.MaxInt64 {
			return nil, eim.Errorf(eim.EINVALID, "%s: %d is too large", col.field.Name, u)
		}
		return int64(u), nil
	case colBool:
		return v.Bool(), nil
	case colTime:
		t := v.Interface().(eim.Time)
		if t.IsZero() {
			return int64(0), nil
		}
		return t.UnixMilli(), nil
	default:
		return encodeJSON(col.field.Name, v)
	}
}

func encodeJSON(name string, v reflect.Value) (string, error) {
	switch v.Kind() {
	case reflect.Slice:
		if v.IsNil() {
			return "[]", nil
		}
	case reflect.Map:
		if v.IsNil() {
			return "{}", nil
		}
	}
	b, err := json.Marshal(v.Interface())
	if err != nil {
		return "", eim.Errorf(eim.EINVALID, "%s: %v", name, err)
	}
	return string(b), nil
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only called with []string
	}
	return string(b)
}

// values returns the SQL values of cols of r.
func values(r eim.Resource, cols []*column) ([]any, error) {
	out := make([]any, len(cols))
	for i, col := range cols {
		v, err := col.value(r)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// scanner holds the scan destinations of one row of a kind. Database null
// types stay here: decode turns them into field values.
type scanner struct {
	c     *codec
	dest  []any
	strs  []string
	nulls []sql.NullString
	ints  []int64
	bools []bool
	raws  [][]byte
}

func (c *codec) newScanner() *scanner {
	n := len(c.cols)
	s := &scanner{c: c, dest: make([]any, n), strs: make([]string, n), nulls: make([]sql.NullString, n), ints: make([]int64, n), bools: make([]bool, n), raws: make([][]byte, n)}
	for i, col := range c.cols {
		switch col.kind {
		case colString:
			s.dest[i] = &s.strs[i]
		case colEdge:
			s.dest[i] = &s.nulls[i]
		case colInt, colUint, colTime:
			s.dest[i] = &s.ints[i]
		case colBool:
			s.dest[i] = &s.bools[i]
		default:
			s.dest[i] = &s.raws[i]
		}
	}
	return s
}

// snapshot returns a copy of s holding the last scanned row, to decode
// again later (s scans the next rows into its own slices; the byte slices
// the driver filled are the scanner's own and are not written to again).
func (s *scanner) snapshot() *scanner {
	return &scanner{c: s.c, strs: slices.Clone(s.strs), nulls: slices.Clone(s.nulls), ints: slices.Clone(s.ints),
		bools: slices.Clone(s.bools), raws: slices.Clone(s.raws)}
}

// decode builds a new resource from the last scanned row.
func (s *scanner) decode() (eim.Resource, error) {
	r := s.c.schema.New()
	rv := reflect.ValueOf(r).Elem()
	for i, col := range s.c.cols {
		v := rv.FieldByIndex(col.field.Index)
		switch col.kind {
		case colString:
			v.SetString(s.strs[i])
		case colEdge:
			v.SetString(s.nulls[i].String)
		case colInt:
			v.SetInt(s.ints[i])
		case colUint:
			v.SetUint(uint64(s.ints[i]))
		case colBool:
			v.SetBool(s.bools[i])
		case colTime:
			if s.ints[i] != 0 {
				v.Set(reflect.ValueOf(eim.TimeFromUnixMilli(s.ints[i])))
			}
		default:
			if len(s.raws[i]) == 0 {
				continue
			}
			if err := json.Unmarshal(s.raws[i], v.Addr().Interface()); err != nil {
				return nil, fmt.Errorf("decode %s.%s: %w", s.c.table, col.name, err)
			}
		}
	}
	return r, nil
}
