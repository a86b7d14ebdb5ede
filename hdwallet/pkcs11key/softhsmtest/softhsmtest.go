// Package softhsmtest gives tests a fresh SoftHSM2 token, as pgtest gives
// them a PostgreSQL database.
//
// The first call writes a private SoftHSM2 configuration (its token
// directory in a temporary directory) and points SOFTHSM2_CONF at it for
// the rest of the test binary; every New initialises a new token there,
// labelled after the test. Processes the test starts (payd) get the same
// configuration from Env.
//
// When SoftHSM2 is not installed the tests are skipped, unless
// EVMPAY_REQUIRE_SOFTHSM=1 (scripts/test.sh sets it, after installing
// the Debian package softhsm2 when it is missing), which turns that into a
// failure.
package softhsmtest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/evmpay/evmpay/hdwallet/pkcs11key"
)

// Token is a fresh, initialised SoftHSM2 token.
type Token struct {
	// Module is the path of SoftHSM2's PKCS#11 library.
	Module string
	// Conf is the SoftHSM2 configuration file (SOFTHSM2_CONF).
	Conf string
	// Label is the token's label; PIN the user PIN; SOPIN the security
	// officer's.
	Label, PIN, SOPIN string
}

// Config is the pkcs11key configuration that opens the token.
func (tok Token) Config() pkcs11key.Config {
	return pkcs11key.Config{Module: tok.Module, Token: tok.Label, PIN: tok.PIN}
}

// Env is what a child process needs to see the token: SOFTHSM2_CONF.
func (tok Token) Env() []string { return []string{"SOFTHSM2_CONF=" + tok.Conf} }

// modulePaths are where Debian and others install SoftHSM2's library.
var modulePaths = []string{
	"/usr/lib/softhsm/libsofthsm2.so",
	"/usr/lib/x86_64-linux-gnu/softhsm/libsofthsm2.so",
	"/usr/lib/aarch64-linux-gnu/softhsm/libsofthsm2.so",
	"/usr/local/lib/softhsm/libsofthsm2.so",
	"/usr/lib64/pkcs11/libsofthsm2.so",
	"/opt/homebrew/lib/softhsm/libsofthsm2.so",
}

// Module returns the path of SoftHSM2's library (SOFTHSM2_MODULE when
// set), or "" when it is not installed.
func Module() string {
	if m := os.Getenv("SOFTHSM2_MODULE"); m != "" {
		return m
	}
	for _, p := range modulePaths {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

var (
	once    sync.Once
	conf    string
	confErr error
)

func setup() (string, error) {
	once.Do(func() {
		dir, err := os.MkdirTemp("", "evmpay-softhsm-")
		if err != nil {
			confErr = err
			return
		}
		tokens := filepath.Join(dir, "tokens")
		if confErr = os.Mkdir(tokens, 0o700); confErr != nil {
			return
		}
		conf = filepath.Join(dir, "softhsm2.conf")
		body := fmt.Sprintf("directories.tokendir = %s\nobjectstore.backend = file\nlog.level = ERROR\nslots.removable = false\n", tokens)
		if confErr = os.WriteFile(conf, []byte(body), 0o600); confErr != nil {
			return
		}
		// Set before the library is first loaded in this process: SoftHSM2
		// reads it in C_Initialize.
		confErr = os.Setenv("SOFTHSM2_CONF", conf)
	})
	return conf, confErr
}

// New initialises a new token for the test, with random PINs.
func New(t testing.TB) Token {
	t.Helper()
	mod := Module()
	if mod == "" {
		if os.Getenv("EVMPAY_REQUIRE_SOFTHSM") == "1" {
			t.Fatal("softhsmtest: SoftHSM2 is required (EVMPAY_REQUIRE_SOFTHSM=1) but its library was not found; install the Debian package softhsm2 (scripts/test.sh does)")
		}
		t.Skip("softhsmtest: SoftHSM2 is not installed (apt-get install softhsm2, or run `make test`)")
	}
	c, err := setup()
	if err != nil {
		t.Fatalf("softhsmtest: %v", err)
	}
	label := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	if len(label) > 23 { // token labels are at most 32 bytes
		label = label[:23]
	}
	tok := Token{Module: mod, Conf: c, Label: label + "-" + random(4), PIN: random(8), SOPIN: random(8)}
	if err := pkcs11key.InitToken(tok.Config(), tok.SOPIN); err != nil {
		t.Fatalf("softhsmtest: %v", err)
	}
	return tok
}

func random(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
