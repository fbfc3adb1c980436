package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse_Store(t *testing.T) {
	const password = "hunter2-db-password"
	env := map[string]string{
		"MCPGW_DATABASE_URL": "postgres://mcpgw:" + password + "@db.internal:5432/mcpgw",
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tests := []struct {
		name     string
		yaml     string
		want     Store  // when there are no problems
		wantPath string // DatabasePath, when there are no problems
		wantPs   Problems
	}{
		{
			name:     "default: sqlite under data_dir",
			yaml:     "data_dir: /var/lib/mcpgw\n",
			want:     Store{Driver: StoreSQLite},
			wantPath: "/var/lib/mcpgw/mcpgw.db",
		},
		{
			name:     "sqlite with store.path",
			yaml:     "store: {driver: sqlite, path: /d/x.db}\n",
			want:     Store{Driver: StoreSQLite, Path: "/d/x.db"},
			wantPath: "/d/x.db",
		},
		{
			name:     "the old spelling database.path",
			yaml:     "database: {path: /d/old.db}\n",
			want:     Store{Driver: StoreSQLite},
			wantPath: "/d/old.db",
		},
		{
			name:     "postgres from a variable, default pool",
			yaml:     "store: {driver: postgres, dsn: '${MCPGW_DATABASE_URL}'}\n",
			want:     Store{Driver: StorePostgres, DSN: env["MCPGW_DATABASE_URL"], MaxConns: DefaultStoreMaxConns},
			wantPath: "data/mcpgw.db",
		},
		{
			name:     "postgres with a pool size",
			yaml:     "store: {driver: postgres, dsn: 'host=db user=x', max_conns: 40}\n",
			want:     Store{Driver: StorePostgres, DSN: "host=db user=x", MaxConns: 40},
			wantPath: "data/mcpgw.db",
		},
		{
			name:   "both paths",
			yaml:   "store: {path: a.db}\ndatabase: {path: b.db}\n",
			wantPs: Problems{fatal("store.path", "and database.path are both set: database.path is the old spelling of store.path; keep one")},
		},
		{
			name:   "unknown driver",
			yaml:   "store: {driver: mysql}\n",
			wantPs: Problems{fatal("store.driver", `"mysql" is not one of sqlite, postgres`)},
		},
		{
			name:   "driver in capitals",
			yaml:   "store: {driver: Postgres, dsn: x}\n",
			wantPs: Problems{fatal("store.driver", `"Postgres" is not one of sqlite, postgres`)},
		},
		{
			name:   "postgres without a dsn",
			yaml:   "store: {driver: postgres}\n",
			wantPs: Problems{fatal("store.dsn", "is required with driver postgres: a connection string such as ${MCPGW_DATABASE_URL}")},
		},
		{
			name: "postgres with paths",
			yaml: "store: {driver: postgres, dsn: '${MCPGW_DATABASE_URL}', path: a.db}\ndatabase: {path: b.db}\n",
			wantPs: Problems{
				fatal("store.path", "and database.path are both set: database.path is the old spelling of store.path; keep one"),
				fatal("store.path", "is a SQLite file; driver postgres connects to store.dsn"),
				fatal("database.path", "is a SQLite file; driver postgres connects to store.dsn"),
			},
		},
		{
			name:   "postgres pool too large",
			yaml:   "store: {driver: postgres, dsn: '${MCPGW_DATABASE_URL}', max_conns: 1001}\n",
			wantPs: Problems{fatal("store.max_conns", "1001 is not from 1 to 1000")},
		},
		{
			name:   "postgres pool negative",
			yaml:   "store: {driver: postgres, dsn: '${MCPGW_DATABASE_URL}', max_conns: -1}\n",
			wantPs: Problems{fatal("store.max_conns", "-1 is not from 1 to 1000")},
		},
		{
			name: "sqlite with a dsn and a pool",
			yaml: "store: {dsn: '${MCPGW_DATABASE_URL}', max_conns: 5}\n",
			wantPs: Problems{
				fatal("store.dsn", "is for driver postgres; driver sqlite keeps its file at store.path"),
				fatal("store.max_conns", "is for driver postgres; driver sqlite has no pool to size"),
			},
		},
		{
			name:   "an unset variable",
			yaml:   "store: {driver: postgres, dsn: '${NOT_SET}'}\n",
			wantPs: Problems{fatal("store.dsn", "environment variable NOT_SET is not set (use ${NOT_SET:-default} for a default)"), fatal("store.dsn", "is required with driver postgres: a connection string such as ${MCPGW_DATABASE_URL}")},
		},
		{
			name:   "a literal password in a bad file",
			yaml:   "store: {driver: sqlite, dsn: 'postgres://u:" + password + "@h/db', max_conns: 0}\n",
			wantPs: Problems{fatal("store.dsn", "is for driver postgres; driver sqlite keeps its file at store.path")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ps := Parse([]byte(tt.yaml), lookup)
			for i := range ps {
				ps[i].Line, ps[i].Column = 0, 0
			}
			if diff := cmp.Diff(tt.wantPs, ps); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			for _, p := range ps {
				if strings.Contains(p.String(), password) || strings.Contains(p.String(), "db.internal") {
					t.Errorf("problem %q shows the DSN", p)
				}
			}
			if len(tt.wantPs) > 0 {
				return
			}
			if diff := cmp.Diff(tt.want, c.Store); diff != "" {
				t.Errorf("Store (-want +got):\n%s", diff)
			}
			if got := c.DatabasePath(); got != tt.wantPath {
				t.Errorf("DatabasePath = %q, want %q", got, tt.wantPath)
			}
		})
	}
}
