package main

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// loopbackPort (for freeAddr) returns a port on 127.0.0.1 that is free now and lies below
// Linux's ephemeral range (32768–60999), so that no outgoing connection's
// source port takes it between this check and its user's bind. A port
// from the ephemeral range (what port 0 gives) is free only for a moment:
// on a busy machine a client connection picks it up within seconds.
func loopbackPort() (int, error) {
	for range 200 {
		p := loopbackPortMin + rand.IntN(loopbackPortMax-loopbackPortMin+1)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		l.Close()
		return p, nil
	}
	return 0, fmt.Errorf("no free loopback port in %d–%d", loopbackPortMin, loopbackPortMax)
}

// The range loopbackPort picks from.
const loopbackPortMin, loopbackPortMax = 20000, 32767

// A port that a server binds later (the dev chain's inner node, a child
// payd in the tests) must come from outside the kernel's ephemeral range:
// there, an outgoing connection can take it first (the cause of two flaky
// runs: "bind: address already in use" and a readyz that never answered).
func TestLoopbackPort_BelowTheEphemeralRange(t *testing.T) {
	low := 32768 // Linux's default
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		low, err = strconv.Atoi(strings.Fields(string(b))[0])
		require.NoError(t, err)
	}
	require.Greater(t, low, loopbackPortMax, "the ephemeral range starts at %d, inside the range loopbackPort picks from", low)
	for range 300 {
		p, err := loopbackPort()
		require.NoError(t, err)
		require.GreaterOrEqual(t, p, loopbackPortMin)
		require.Less(t, p, low)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		require.NoError(t, err, "port %d is free", p)
		require.NoError(t, l.Close())
	}
}
