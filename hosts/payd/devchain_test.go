package main

import (
	"net"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

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
