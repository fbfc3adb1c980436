// Package pgtest gives a test a fresh, empty PostgreSQL database, so that
// the store's tests run on PostgreSQL as they do on SQLite.
//
// Where the server comes from, in order:
//
//   - MCPGW_TEST_POSTGRES_DSN: a server that runs already (CI starts one
//     with scripts/postgres.sh). Each test gets a new database on it,
//     dropped at the test's end.
//   - Debian's server binaries (/usr/lib/postgresql/*/bin/initdb): one
//     throwaway server per test binary, in a temporary folder, on 127.0.0.1
//     and a free port, started by the first test that asks and stopped by
//     Main. initdb refuses to run as root, so under root the server runs as
//     nobody.
//   - Neither: the test is skipped, saying why, unless
//     MCPGW_REQUIRE_POSTGRES=1, which fails it.
//
// A package that uses DSN calls Main from its TestMain.
package pgtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The environment variables pgtest reads.
const (
	EnvDSN     = "MCPGW_TEST_POSTGRES_DSN"
	EnvRequire = "MCPGW_REQUIRE_POSTGRES"
)

// startTimeout bounds starting the throwaway server (pg_ctl -w -t), and
// opTimeout creating or dropping one database.
const (
	startTimeout = 60 * time.Second
	opTimeout    = 30 * time.Second
)

var (
	mainCalled bool

	startOnce sync.Once
	srv       *server // the throwaway server, once started
	adminDSN  string  // where DSN creates databases
	startErr  error
	skipWhy   string // why there is no server, when there is none
)

// Main runs the tests of m and stops the throwaway server if one was
// started. Call it from TestMain: os.Exit(pgtest.Main(m)).
func Main(m *testing.M) int {
	mainCalled = true
	code := m.Run()
	if srv != nil {
		if err := srv.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: stopping the server: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// DSN returns the connection string of a new, empty database that only t
// uses, and drops the database when t ends. Without a PostgreSQL it skips t
// (or fails it under MCPGW_REQUIRE_POSTGRES=1).
func DSN(t testing.TB) string {
	t.Helper()
	if !mainCalled {
		t.Fatal("pgtest.DSN: the package's TestMain must call pgtest.Main, which stops the server")
	}
	startOnce.Do(start)
	switch {
	case startErr != nil:
		t.Fatalf("pgtest: %v", startErr)
	case skipWhy != "":
		if os.Getenv(EnvRequire) == "1" {
			t.Fatalf("pgtest: %s, and %s=1", skipWhy, EnvRequire)
		}
		t.Skipf("pgtest: %s", skipWhy)
	}
	name := "mcpgw_test_" + randomHex(8)
	ident := pgx.Identifier{name}.Sanitize()
	if err := adminExec(`CREATE DATABASE ` + ident); err != nil {
		t.Fatalf("pgtest: creating a database: %v", err)
	}
	t.Cleanup(func() {
		if err := adminExec(`DROP DATABASE IF EXISTS ` + ident + ` WITH (FORCE)`); err != nil {
			t.Errorf("pgtest: dropping database %s: %v", name, err)
		}
	})
	dsn, err := withDatabase(adminDSN, name)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return dsn
}

// adminExec runs one statement on the admin database.
func adminExec(sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, adminDSN)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// withDatabase is dsn naming database db instead of its own.
func withDatabase(dsn, db string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("%s is not a URL", EnvDSN)
		}
		u.Path = "/" + db
		return u.String(), nil
	}
	return dsn + " dbname=" + db, nil // a later key wins
}

// start finds or starts the server, once per test binary.
func start() {
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		adminDSN = dsn
		return
	}
	bin := binDir()
	if bin == "" {
		skipWhy = fmt.Sprintf("no PostgreSQL: %s is not set and initdb is not installed (apt-get install postgresql)", EnvDSN)
		return
	}
	srv, startErr = startServer(bin)
	if startErr == nil {
		adminDSN = srv.dsn
	}
}

// binDir is the folder of the newest Debian PostgreSQL's binaries, or of
// the initdb on PATH, or "".
func binDir() string {
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	sort.Slice(found, func(i, j int) bool { return version(found[i]) > version(found[j]) })
	if len(found) > 0 {
		return filepath.Dir(found[0])
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if p, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Dir(p)
		}
	}
	return ""
}

// version is the major version in a path .../postgresql/<v>/bin/initdb.
func version(path string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(path))))
	return v
}

// server is a throwaway PostgreSQL.
type server struct {
	bin, dir string
	asUser   string // run the binaries as this user ("" as ourselves)
	dsn      string
}

// startServer initializes a cluster in a new temporary folder and starts
// it on 127.0.0.1 only (no Unix socket), with a random password, and
// durability off: the data is thrown away.
func startServer(bin string) (_ *server, err error) {
	dir, err := os.MkdirTemp("", "mcpgw-pgtest-")
	if err != nil {
		return nil, err
	}
	s := &server{bin: bin, dir: dir}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	password := randomHex(16)
	pwfile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwfile, []byte(password+"\n"), 0o600); err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		// initdb refuses root: nobody gets the folder and runs the server.
		u, err := user.Lookup("nobody")
		if err != nil {
			return nil, fmt.Errorf("running as root and there is no user nobody to run PostgreSQL as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		for _, p := range []string{dir, pwfile} {
			if err := os.Chown(p, uid, gid); err != nil {
				return nil, err
			}
		}
		s.asUser = "nobody"
	}
	data := filepath.Join(dir, "data")
	if out, err := s.run("initdb", "-D", data, "-U", "mcpgw", "--pwfile", pwfile,
		"--auth=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync"); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	// A free port can be taken between our check and the server's bind:
	// try a few.
	for attempt := 0; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -c unix_socket_directories='' "+
			"-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300", port)
		logfile := filepath.Join(dir, "server.log")
		out, err := s.run("pg_ctl", "-D", data, "-l", logfile, "-w", "-t", strconv.Itoa(int(startTimeout.Seconds())), "-o", opts, "start")
		if err == nil {
			s.dsn = (&url.URL{Scheme: "postgres", User: url.UserPassword("mcpgw", password),
				Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Path: "/postgres", RawQuery: "sslmode=disable"}).String()
			return s, nil
		}
		if attempt == 2 {
			log, _ := os.ReadFile(logfile)
			return nil, fmt.Errorf("pg_ctl start: %w\n%s\nserver log:\n%s", err, out, log)
		}
	}
}

// stop stops the server at once (the data is thrown away) and removes its
// folder.
func (s *server) stop() error {
	out, err := s.run("pg_ctl", "-D", filepath.Join(s.dir, "data"), "-m", "immediate", "-w", "stop")
	if err != nil {
		return fmt.Errorf("pg_ctl stop: %w\n%s", err, out)
	}
	return os.RemoveAll(s.dir)
}

// run runs one of the server's binaries, as s.asUser if set, and returns
// its output.
func (s *server) run(name string, args ...string) ([]byte, error) {
	path := filepath.Join(s.bin, name)
	var cmd *exec.Cmd
	if s.asUser != "" {
		cmd = exec.Command("runuser", append([]string{"-u", s.asUser, "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	cmd.Dir = s.dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.Bytes(), err
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
