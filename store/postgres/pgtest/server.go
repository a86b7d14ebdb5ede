package pgtest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

// Server is a private PostgreSQL server in a temporary directory, on a free
// loopback port, with trust authentication. As root it runs as the postgres
// user (PostgreSQL refuses root).
type Server struct {
	dir    string
	bin    string
	url    string
	runAs  *syscall.Credential
	stopMu sync.Once
}

// StartServer runs initdb and pg_ctl start. settings are extra postgres
// settings ("fsync=off"); with none the server keeps PostgreSQL's durable
// defaults.
func StartServer(settings ...string) (*Server, error) {
	bin, err := findBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "evmpay-pg-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, bin: bin}
	if os.Geteuid() == 0 {
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
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c shared_buffers=128MB", port, dir)
	for _, set := range settings {
		opts += " -c " + set
	}
	if out, err := s.run("pg_ctl", "-D", data, "-o", opts, "-l", filepath.Join(dir, "log"), "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pg_ctl start: %v: %s %s", err, out, log)
	}
	s.url = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	return s, nil
}

// URL is the server's maintenance database.
func (s *Server) URL() string { return s.url }

// PID returns the postmaster's process id (0 if unknown).
func (s *Server) PID() int {
	b, err := os.ReadFile(filepath.Join(s.dir, "data", "postmaster.pid"))
	if err != nil {
		return 0
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	pid, _ := strconv.Atoi(string(bytes.TrimSpace(line)))
	return pid
}

// Stop stops the server and deletes its directory. It is safe to call more
// than once.
func (s *Server) Stop() {
	s.stopMu.Do(func() {
		_, _ = s.run("pg_ctl", "-D", filepath.Join(s.dir, "data"), "-m", "immediate", "-w", "stop")
		os.RemoveAll(s.dir)
	})
}

func (s *Server) run(name string, args ...string) ([]byte, error) {
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

// freePort returns a loopback port that is free now, below Linux's
// ephemeral range (32768–60999): port 0 would give an ephemeral port, which
// an outgoing connection can take before the server binds it.
func freePort() (int, error) {
	for range 200 {
		p := 20000 + rand.IntN(12768)
		if l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p)); err == nil {
			l.Close()
			return p, nil
		}
	}
	return 0, errors.New("pgtest: no free loopback port in 20000–32767")
}
