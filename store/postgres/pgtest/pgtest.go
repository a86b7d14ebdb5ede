// Package pgtest gives tests a real PostgreSQL database.
//
// With TEST_DATABASE_URL set (scripts/test.sh sets it), each test gets a
// fresh database created on that server. Without it, the first test that
// asks starts a private server (initdb and pg_ctl in a temporary directory,
// on a free loopback port) that Main stops after the package's tests.
// When PostgreSQL cannot be found the tests are skipped, unless
// EVMPAY_REQUIRE_POSTGRES=1, which turns that into a failure.
//
// A package that uses pgtest runs its tests through Main:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		st := pgtest.New(t) // migrated *postgres.Store on a fresh database
//		…
//	}
package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/lib/pq" // driver

	"github.com/evmpay/evmpay/store/postgres"
)

var (
	mu       sync.Mutex
	started  bool
	adminURL string
	startErr error
	private  *server
	template string
)

// Main runs the package's tests and stops the private server, if one was
// started, afterwards.
func Main(m *testing.M) {
	code := m.Run()
	mu.Lock()
	if private != nil {
		private.stop()
	}
	mu.Unlock()
	os.Exit(code)
}

// New returns a migrated store on a fresh database that is dropped when the
// test ends.
func New(t testing.TB) *postgres.Store {
	t.Helper()
	u := URL(t)
	ctx := context.Background()
	st, err := postgres.Open(ctx, u, postgres.Config{MaxOpenConns: 10})
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// URL returns the URL of a fresh, migrated database that is dropped when the
// test ends.
func URL(t testing.TB) string {
	t.Helper()
	admin, tmpl, err := setup()
	if err != nil {
		if os.Getenv("EVMPAY_REQUIRE_POSTGRES") == "1" {
			t.Fatalf("pgtest: PostgreSQL is required (EVMPAY_REQUIRE_POSTGRES=1) but unavailable: %v", err)
		}
		t.Skipf("pgtest: no PostgreSQL (set TEST_DATABASE_URL, or install the server; run `make test`): %v", err)
	}
	name := "evmpay_test_" + randomHex(6)
	if err := createDatabase(admin, name, tmpl); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() { dropDatabase(admin, name) })
	return withDatabase(admin, name)
}

// AdminURL returns the URL of the server's maintenance database, starting a
// private server if needed. Tests that stop and start the database use it.
func AdminURL(t testing.TB) string {
	t.Helper()
	admin, _, err := setup()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return admin
}

func setup() (admin, tmpl string, err error) {
	mu.Lock()
	defer mu.Unlock()
	if started {
		return adminURL, template, startErr
	}
	started = true
	adminURL, startErr = findServer()
	if startErr == nil {
		template, startErr = makeTemplate(adminURL)
	}
	return adminURL, template, startErr
}

func findServer() (string, error) {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u, nil
	}
	s, err := startServer()
	if err != nil {
		return "", err
	}
	private = s
	return s.url, nil
}

// makeTemplate creates and migrates a database that every test database
// copies, so that migrations run once per test binary.
func makeTemplate(admin string) (string, error) {
	name := "evmpay_tmpl_" + randomHex(6)
	if err := createDatabase(admin, name, ""); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := postgres.Open(ctx, withDatabase(admin, name), postgres.Config{MaxOpenConns: 2})
	if err != nil {
		return "", err
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		return "", fmt.Errorf("migrate template: %w", err)
	}
	return name, nil
}

var createMu sync.Mutex

func createDatabase(admin, name, tmpl string) error {
	createMu.Lock()
	defer createMu.Unlock()
	db, err := sql.Open("postgres", admin)
	if err != nil {
		return err
	}
	defer db.Close()
	q := "CREATE DATABASE " + name
	if tmpl != "" {
		q += " TEMPLATE " + tmpl
	}
	for attempt := 0; ; attempt++ {
		_, err = db.Exec(q)
		// Another package's test binary may be copying the same server's
		// template at this moment; PostgreSQL refuses concurrent use.
		if err == nil || attempt == 50 || !strings.Contains(err.Error(), "being accessed by other users") {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func dropDatabase(admin, name string) {
	db, err := sql.Open("postgres", admin)
	if err != nil {
		return
	}
	defer db.Close()
	_, _ = db.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)")
}

func withDatabase(admin, name string) string {
	u, err := url.Parse(admin)
	if err != nil || u.Scheme == "" {
		return admin + " dbname=" + name
	}
	u.Path = "/" + name
	return u.String()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// server is a private PostgreSQL server in a temporary directory.
type server struct {
	dir    string
	bin    string
	url    string
	runAs  *syscall.Credential
	stopMu sync.Once
}

// startServer runs initdb and pg_ctl start on a free loopback port.
func startServer() (*server, error) {
	bin, err := findBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "evmpay-pg-")
	if err != nil {
		return nil, err
	}
	s := &server{dir: dir, bin: bin}
	if os.Geteuid() == 0 {
		// PostgreSQL refuses to run as root: run it as the postgres user.
		cred, err := postgresUser()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		s.runAs = cred
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	if out, err := s.run("initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c shared_buffers=128MB", port, dir)
	if out, err := s.run("pg_ctl", "-D", data, "-o", opts, "-l", filepath.Join(dir, "log"), "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pg_ctl start: %v: %s %s", err, out, log)
	}
	s.url = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	return s, nil
}

func (s *server) stop() {
	s.stopMu.Do(func() {
		_, _ = s.run("pg_ctl", "-D", filepath.Join(s.dir, "data"), "-m", "immediate", "-w", "stop")
		os.RemoveAll(s.dir)
	})
}

func (s *server) run(name string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir = s.dir
	if s.runAs != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.runAs}
	}
	return cmd.CombinedOutput()
}

func findBin() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		return filepath.Dir(p), nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(matches) > 0 {
		return filepath.Dir(matches[len(matches)-1]), nil
	}
	return "", errors.New("initdb not found (install the PostgreSQL server, e.g. apt-get install postgresql)")
}

func postgresUser() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root needs a postgres user to run the server: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
