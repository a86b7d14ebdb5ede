// Package kmstest gives tests a private AWS KMS emulator: local-kms, built
// from the separate module hosts/localkms and run on a free loopback port
// with its key database in a temporary directory.
//
// With EVMPAY_LOCAL_KMS naming a built binary (scripts/test.sh builds it
// once and sets it) that binary is used; otherwise the first Start of a
// test binary builds it with `go build` (which needs the Go module proxy
// the first time). When it cannot be had the tests are skipped, unless
// EVMPAY_REQUIRE_KMS=1 (scripts/test.sh sets it), which turns that into
// a failure.
package kmstest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
)

// Region is the region of the emulator's key ARNs and of Client.
const Region = "eu-west-2"

// Emulator is a running local-kms.
type Emulator struct {
	// URL is the emulator's endpoint, http://127.0.0.1:PORT (the AWS SDK's
	// BaseEndpoint).
	URL string
	// DataDir holds the emulator's keys; a restart on it keeps them.
	DataDir string

	t    testing.TB
	addr string
	mu   sync.Mutex
	cmd  *exec.Cmd
}

// Env is what a child process needs to reach the emulator with the AWS
// SDK's default configuration: the endpoint, a region and (unchecked)
// credentials.
func (e *Emulator) Env() []string {
	return []string{"AWS_ENDPOINT_URL_KMS=" + e.URL, "AWS_REGION=" + Region,
		"AWS_ACCESS_KEY_ID=evmpay-test", "AWS_SECRET_ACCESS_KEY=evmpay-test", "AWS_EC2_METADATA_DISABLED=true"}
}

// Client is a KMS client of the emulator.
func (e *Emulator) Client() *kms.Client {
	return kms.New(kms.Options{
		Region:       Region,
		BaseEndpoint: aws.String(e.URL),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "evmpay-test", SecretAccessKey: "evmpay-test"}, nil
		}),
	})
}

// Start runs an emulator for the test; it is stopped when the test ends.
func Start(t testing.TB) *Emulator {
	t.Helper()
	bin, err := binary()
	if err != nil {
		if os.Getenv("EVMPAY_REQUIRE_KMS") == "1" {
			t.Fatalf("kmstest: the KMS emulator is required (EVMPAY_REQUIRE_KMS=1) but unavailable: %v", err)
		}
		t.Skipf("kmstest: no KMS emulator (run `make test`, or set EVMPAY_LOCAL_KMS): %v", err)
	}
	e := &Emulator{t: t, DataDir: t.TempDir()}
	if err := e.start(bin, "127.0.0.1:0"); err != nil {
		t.Fatalf("kmstest: %v", err)
	}
	t.Cleanup(e.Stop)
	return e
}

// Stop stops the emulator (KMS unreachable until Restart).
func (e *Emulator) Stop() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cmd == nil {
		return
	}
	_ = e.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = e.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = e.cmd.Process.Kill()
		<-done
	}
	e.cmd = nil
}

// Restart starts the emulator again on the same address and key database.
func (e *Emulator) Restart() {
	e.t.Helper()
	bin, err := binary()
	if err != nil {
		e.t.Fatalf("kmstest: %v", err)
	}
	var last error
	for range 50 { // the port may linger briefly after the stop
		if last = e.start(bin, e.addr); last == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.t.Fatalf("kmstest: restart on %s: %v", e.addr, last)
}

func (e *Emulator) start(bin, addr string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	cmd := exec.Command(bin, "--addr", addr, "--data", e.DataDir, "--region", Region)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr strings.Builder
	cmd.Stderr = &lockedWriter{w: &stderr}
	if err := cmd.Start(); err != nil {
		return err
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if l := sc.Text(); strings.HasPrefix(l, "listening on ") {
				lines <- strings.TrimPrefix(l, "listening on ")
			}
		}
		close(lines)
	}()
	select {
	case u, ok := <-lines:
		if !ok {
			_ = cmd.Wait()
			return fmt.Errorf("local-kms exited: %s", stderr.String())
		}
		e.URL, e.addr, e.cmd = u, strings.TrimPrefix(u, "http://"), cmd
		return nil
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return errors.New("local-kms did not start within 30 s")
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// binary returns EVMPAY_LOCAL_KMS, or builds hosts/localkms once.
func binary() (string, error) {
	buildOnce.Do(func() {
		if p := os.Getenv("EVMPAY_LOCAL_KMS"); p != "" {
			binPath = p
			_, buildErr = os.Stat(p)
			return
		}
		src, err := findModule()
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "evmpay-localkms-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "localkms")
		cmd := exec.Command("go", "build", "-o", binPath, ".")
		cmd.Dir = src
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build in %s: %v: %s", src, err, out)
		}
	})
	return binPath, buildErr
}

// findModule finds hosts/localkms above the test's working directory (the
// package's directory inside the evmpay module).
func findModule() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "hosts", "localkms")
		if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("hosts/localkms not found above the working directory")
		}
		dir = parent
	}
}
