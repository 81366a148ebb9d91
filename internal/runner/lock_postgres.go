package runner

import (
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/url"
	"reflect"
	"regexp"
	"sort"
	"strings"

	"github.com/lib/pq"
)

// The CLI's postgres:// backend (pkg/backend/diy/postgres) is a bucket in one
// table, pulumi_state unless the URL's table parameter names another: key TEXT
// PRIMARY KEY, data JSON {"data": <the blob, base64>}, updated_at. A lock is
// the row of its key. As for every DIY backend but file://, the URL's path is
// a prefix of every key (blob.PrefixedBucket in pkg/backend/diy/backend.go):
// for postgres://host/db, where the path also names the database, a lock is
// the row db/.pulumi/locks/<org>/<project>/<stack>/<lock id>.json. The runner connects with lib/pq, the CLI's own driver at
// the CLI's version, from the URL the CLI gets (less table=, as the CLI does)
// and the same PG* variables: the same server, database, user and TLS mode.

// postgresTable is a table name the runner puts into SQL as the CLI does,
// unquoted: a name, or schema.name. Anything else is refused rather than
// quoted, which would name another table than the CLI's.
var postgresTable = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z_][A-Za-z0-9_$]*)?$`)

type postgresLockStore struct {
	db                 *sql.DB
	table              string
	prefix             string // of every key: the URL's path, as a folder
	where              string // the backend URL without credentials, for messages
	project, stackName string
}

func openPostgresLocks(ctx context.Context, spec Spec, project string) (lockStore, error) {
	where := publicBackend(spec.Backend)
	u, err := url.Parse(spec.Backend)
	if err != nil {
		return nil, fmt.Errorf("stale lock: the backend URL %s does not parse", where)
	}
	q := u.Query()
	table := q.Get("table")
	if table == "" {
		table = "pulumi_state"
	}
	if !postgresTable.MatchString(table) {
		return nil, fmt.Errorf("stale lock: the backend %s names the table %q, which the runner does not put into SQL; "+
			"clear the lock by hand", where, table)
	}
	q.Del("table")
	u.RawQuery = q.Encode()
	cfg, err := pq.NewConfig(pqConnString(u, workspaceEnv(spec)))
	if err != nil {
		return nil, fmt.Errorf("stale lock: the backend %s: %w", where, scrubURL(err, u))
	}
	connector, err := pq.NewConnectorConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("stale lock: the backend %s: %w", where, scrubURL(err, u))
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(1)
	return &postgresLockStore{db: db, table: table, prefix: bucketPrefix(u), where: where,
		project: project, stackName: spec.StackName}, nil
}

// pqConnString is the connection string of u in lib/pq's key=value form,
// preceded by the PG* variables of env: a later key wins, so the URL comes
// before env, and env before the runner's own environment (which lib/pq
// reads last-resort), as for the CLI process, whose environment is the
// runner's with env over it. The variable names are lib/pq's own (its
// Config's env tags), so they are those the CLI honours.
func pqConnString(u *url.URL, env map[string]string) string {
	var kvs []string
	add := func(k, v string) {
		if v != "" {
			kvs = append(kvs, k+"='"+strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v)+"'")
		}
	}
	t := reflect.TypeFor[pq.Config]()
	for i := range t.NumField() {
		f := t.Field(i)
		key, name := f.Tag.Get("postgres"), f.Tag.Get("env")
		if key == "" || key == "-" || name == "" || name == "-" {
			continue
		}
		add(key, env[name])
	}
	sort.Strings(kvs) // one order for one input
	n := len(kvs)
	// The URL, as lib/pq reads one (its convertURL).
	if u.User != nil {
		pw, _ := u.User.Password()
		add("user", u.User.Username())
		add("password", pw)
	}
	if host, port, err := net.SplitHostPort(u.Host); err != nil {
		add("host", u.Host)
	} else {
		add("host", host)
		add("port", port)
	}
	if u.Path != "" {
		add("dbname", u.Path[1:])
	}
	q := u.Query()
	for k := range q {
		add(k, q.Get(k))
	}
	sort.Strings(kvs[n:])
	return strings.Join(kvs, " ")
}

// scrubURL keeps the URL's password out of an error that may quote it.
func scrubURL(err error, u *url.URL) error {
	if u.User == nil {
		return err
	}
	if pw, ok := u.User.Password(); ok && pw != "" && strings.Contains(err.Error(), pw) {
		return errors.New(strings.ReplaceAll(err.Error(), pw, "****"))
	}
	return err
}

func (s *postgresLockStore) locks(ctx context.Context) ([]lockFile, error) {
	// The CLI creates the table on its first use: none, no lock.
	var exists sql.NullString
	if err := s.db.QueryRowContext(ctx, "SELECT to_regclass($1)::text", s.table).Scan(&exists); err != nil {
		return nil, fmt.Errorf("stale lock: the backend %s: %w", s.where, err)
	}
	if !exists.Valid {
		return nil, nil
	}
	// Every lock of the backend (the stack's are picked out below, where the
	// underscores of its names are plain characters).
	like := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s.prefix+lockRoot) + "%"
	rows, err := s.db.QueryContext(ctx, "SELECT key, data->>'data' FROM "+s.table+` WHERE key LIKE $1 ESCAPE '\'`, like)
	if err != nil {
		return nil, fmt.Errorf("stale lock: the backend %s: %w", s.where, err)
	}
	defer rows.Close()
	var locks []lockFile
	for rows.Next() {
		var key string
		var data sql.NullString
		if err := rows.Scan(&key, &data); err != nil {
			return nil, fmt.Errorf("stale lock: the backend %s: %w", s.where, err)
		}
		rel, ok := strings.CutPrefix(key, s.prefix)
		if !ok || !lockKeyOf(rel, s.project, s.stackName) {
			continue
		}
		blob, err := base64.StdEncoding.DecodeString(data.String)
		if err == nil && !data.Valid {
			err = errors.New("no data")
		}
		l := parseLock(s.where+"/"+rel, blob, err) // as the CLI names it

		l.key, l.content = key, data.String
		locks = append(locks, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("stale lock: the backend %s: %w", s.where, err)
	}
	return locks, nil
}

// remove deletes the lock's row only while it holds what was judged: a lock
// key is a fresh UUID per CLI process, so a changed row is not the dead
// operation's.
func (s *postgresLockStore) remove(ctx context.Context, l lockFile) (bool, error) {
	res, err := s.db.ExecContext(ctx, "DELETE FROM "+s.table+" WHERE key = $1 AND data->>'data' = $2", l.key, l.content)
	if err != nil {
		return false, fmt.Errorf("stale lock: remove %s: %w", l.Path, err)
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

func (s *postgresLockStore) close() error { return s.db.Close() }
