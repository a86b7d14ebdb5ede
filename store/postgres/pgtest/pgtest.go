// Package pgtest gives tests a real PostgreSQL database.
//
// With TEST_DATABASE_URL set (scripts/test.sh sets it), each test gets a
// fresh database created on that server; the role in the URL needs
// CREATEDB (it creates and drops a database per test, with DROP DATABASE
// … WITH (FORCE), so PostgreSQL 13 or later). Tests stay within the default
// max_connections of 100. Without it, the first test that
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
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
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
	private  *Server
	template string
)

// Main runs the package's tests and stops the private server, if one was
// started, afterwards.
func Main(m *testing.M) {
	code := m.Run()
	mu.Lock()
	if private != nil {
		private.Stop()
	} else if template != "" {
		dropDatabase(adminURL, template) // someone's own server: leave it clean
	}
	mu.Unlock()
	os.Exit(code)
}

// PoolSize is the connection pool of a store from New: enough for a test's
// concurrent work (a held advisory lock, a transaction and readers), small
// enough that parallel tests of several packages stay within a server's
// default max_connections (100). A test that needs more opens its own.
const PoolSize = 4

// ChainID is the chain a store from New is bound to (store.Store.Chain):
// the simulated chain's id, which the suites' chains use. A test of
// another chain binds its own: st.Chain(id).
const ChainID = 1337

// New returns a migrated store on a fresh database that is dropped when the
// test ends, bound to chain ChainID, with a pool of PoolSize connections
// (two kept idle).
func New(t testing.TB) *postgres.Store {
	t.Helper()
	u := URL(t)
	ctx := context.Background()
	st, err := postgres.Open(ctx, u, postgres.Config{MaxOpenConns: PoolSize, MaxIdleConns: 2})
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st.Chain(ChainID).(*postgres.Store)
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
	// A scratch server: durability is not under test, speed is.
	// PostgreSQL's default connection limit: the suite must pass on any
	// server a developer points TEST_DATABASE_URL at.
	s, err := StartServer("fsync=off", "synchronous_commit=off", "full_page_writes=off", "max_connections=100")
	if err != nil {
		return "", err
	}
	private = s
	return s.URL(), nil
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

// NewDatabase creates an empty database on the server at adminURL and
// returns its URL and a function that drops it (for load programs; tests use
// URL or New).
func NewDatabase(adminURL string) (string, func(), error) {
	name := "evmpay_" + randomHex(6)
	if err := createDatabase(adminURL, name, ""); err != nil {
		return "", nil, err
	}
	return withDatabase(adminURL, name), func() { dropDatabase(adminURL, name) }, nil
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
