package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/filter"
	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// dialect is what differs between the engines. Everything else is shared.
type dialect struct {
	name   string
	pg     bool
	filter filter.Dialect
}

var (
	sqliteDialect   = &dialect{name: "sqlite", filter: filter.SQLite}
	postgresDialect = &dialect{name: "postgres", pg: true, filter: filter.Postgres}
)

// rebind turns the "?" placeholders of a statement written for SQLite into
// PostgreSQL's "$N". Our statements contain no other question marks.
func (d *dialect) rebind(q string) string {
	if !d.pg {
		return q
	}
	var b strings.Builder
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(q[i])
	}
	return b.String()
}

// inList returns a predicate "col IN (the values)" with a single parameter,
// so the statement text does not depend on the number of values.
func (d *dialect) inList(col, placeholder string) string {
	if d.pg {
		return col + " = ANY(" + placeholder + "::text[])"
	}
	return col + " IN (SELECT value FROM json_each(" + placeholder + "))"
}

// listArg encodes the value bound to an inList placeholder.
func (d *dialect) listArg(vs []string) any {
	if d.pg {
		return vs
	}
	return jsonText(vs)
}

// args collects statement arguments and renders their placeholders.
type args struct {
	pg   bool
	list []any
}

func (a *args) add(v any) string {
	a.list = append(a.list, v)
	if a.pg {
		return "$" + strconv.Itoa(len(a.list))
	}
	return "?"
}

// stmtCache keeps prepared statements for SQLite, where preparing a wide
// INSERT costs more than running it; pgx caches prepared statements per
// connection itself. The statements are prepared at Open, before any
// transaction holds the single write connection, and the cache is
// read-only afterwards; other statements run unprepared.
type stmtCache struct {
	m map[*sql.DB]map[string]*sql.Stmt
}

func newStmtCache() *stmtCache { return &stmtCache{m: map[*sql.DB]map[string]*sql.Stmt{}} }

// prepare adds the statements for db.
func (c *stmtCache) prepare(ctx context.Context, db *sql.DB, qs []string) error {
	byQ := c.m[db]
	if byQ == nil {
		byQ = map[string]*sql.Stmt{}
		c.m[db] = byQ
	}
	for _, q := range qs {
		if byQ[q] != nil {
			continue
		}
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", q, err)
		}
		byQ[q] = st
	}
	return nil
}

func (c *stmtCache) get(db *sql.DB, q string) *sql.Stmt { return c.m[db][q] }

func (c *stmtCache) close() {
	for _, byQ := range c.m {
		for _, st := range byQ {
			st.Close()
		}
	}
	c.m = map[*sql.DB]map[string]*sql.Stmt{}
}

// preparedWrites and preparedReads are the statements worth preparing.
func preparedWrites() []string {
	qs := []string{revisionUpdate, eventInsert1, nodeCredentials, nodeCredentialsScoped}
	for _, k := range eim.Kinds() {
		c := codecOf(k)
		qs = append(qs, c.insert, c.update, c.updateScoped, c.del, c.delScoped, c.get, c.getScoped)
	}
	return qs
}

func preparedReads() []string {
	qs := []string{nodeCredentials, nodeCredentialsScoped}
	for _, k := range eim.Kinds() {
		c := codecOf(k)
		qs = append(qs, c.get, c.getScoped)
	}
	return qs
}

// dbError is what the engines tell about a failed statement, reduced to
// what the store translates.
type dbError struct {
	unique, foreignKey, notNull bool
	constraint                  string // PostgreSQL: the constraint or index name
	table, detail               string
	columns                     []string // SQLite: "t.a, t.b" of a unique failure
}

func (d *dialect) classify(err error) (dbError, bool) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		e := dbError{constraint: pe.ConstraintName, table: pe.TableName, detail: pe.Detail}
		switch pe.Code {
		case "23505":
			e.unique = true
		case "23503":
			e.foreignKey = true
		case "23502":
			e.notNull = true
		default:
			return e, false
		}
		return e, true
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		var e dbError
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			e.unique = true
			// "UNIQUE constraint failed: hosts.project, hosts.serial_number"
			if _, cols, ok := strings.Cut(se.Error(), "constraint failed: "); ok {
				for c := range strings.SplitSeq(cols, ",") {
					c = strings.TrimSpace(c)
					if t, col, ok := strings.Cut(c, "."); ok {
						e.table = t
						e.columns = append(e.columns, strings.Fields(col)[0])
					}
				}
			}
		case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
			e.foreignKey = true
		case sqlite3.SQLITE_CONSTRAINT_TRIGGER:
			// ON DELETE RESTRICT reports through a trigger code.
			if !strings.Contains(se.Error(), "FOREIGN KEY") {
				return e, false
			}
			e.foreignKey = true
		case sqlite3.SQLITE_CONSTRAINT_NOTNULL:
			e.notNull = true
		default:
			return e, false
		}
		return e, true
	}
	return dbError{}, false
}

// translate turns engine errors into *eim.Error where they have a meaning
// for callers; r, when known, names the value in conflict messages.
func (d *dialect) translate(err error, r eim.Resource) error {
	if err == nil {
		return nil
	}
	var ee *eim.Error
	if errors.As(err, &ee) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if isBusy(err) {
		return eim.Errorf(eim.EUNAVAILABLE, "the database is busy, try again")
	}
	e, ok := d.classify(err)
	if !ok {
		return err
	}
	switch {
	case e.unique:
		return conflictError(e, r)
	case e.notNull:
		return eim.Errorf(eim.EINVALID, "a required value is missing (%s)", e.detail)
	}
	return err // foreign keys are translated by the caller, who knows the row
}

func isBusy(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		c := se.Code() & 0xff
		return c == sqlite3.SQLITE_BUSY || c == sqlite3.SQLITE_LOCKED
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "40001" || pe.Code == "40P01" || pe.Code == "55P03"
	}
	return false
}

// conflictError names the field and value of a uniqueness violation. Unique
// indexes are named <table>_<column>_key (the primary key <table>_pkey).
func conflictError(e dbError, r eim.Resource) error {
	col := ""
	switch {
	case len(e.columns) > 0:
		for _, c := range e.columns {
			if c != "project" {
				col = c
			}
		}
	case strings.HasSuffix(e.constraint, "_pkey"):
		col = "id"
	case strings.HasSuffix(e.constraint, "_key") && e.table != "":
		col = strings.TrimSuffix(strings.TrimPrefix(e.constraint, e.table+"_"), "_key")
	}
	if r == nil {
		if col == "" {
			return eim.Errorf(eim.ECONFLICT, "already exists")
		}
		return eim.Errorf(eim.ECONFLICT, "%s: already exists", col)
	}
	c := codecOf(r.ResourceKind())
	if f := c.byColumn[col]; f != nil {
		return eim.Errorf(eim.ECONFLICT, "%s: %s %v already exists", f.field.Name, r.ResourceKind(), f.field.Value(r).Interface())
	}
	return eim.Errorf(eim.ECONFLICT, "%s: a %s with this value already exists", col, r.ResourceKind())
}

// errAborted is returned by every statement after one failed.
func errAborted(cause error) error {
	return fmt.Errorf("transaction aborted by an earlier error: %w", cause)
}
