package evmpaytest

import (
	"bytes"
	"regexp"
	"sync"
	"testing"

	"github.com/evmpay/evmpay/hosts/evmpaytest/wait"
)

// Output is an io.Writer to hand to code under test that prints (a
// program's run function, a logger), read back while that code runs. It is
// safe for concurrent use. The zero value is ready to use.
type Output struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write implements io.Writer.
func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

// String is everything written so far.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// Wait waits until what was written matches the regular expression
// pattern and returns the leftmost match and its submatches
// (regexp.FindStringSubmatch). It fails the test with everything written
// when nothing matches within wait.DefaultTimeout.
func (o *Output) Wait(tb testing.TB, pattern string) []string {
	tb.Helper()
	re := regexp.MustCompile(pattern)
	var m []string
	wait.Until(tb, "output matching "+pattern, func() (bool, any) {
		s := o.String()
		m = re.FindStringSubmatch(s)
		return m != nil, "\n" + s
	})
	return m
}
