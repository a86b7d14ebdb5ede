package rpcproxy

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
)

// The proxy's caps on what outsiders can make it hold: bytes (budget),
// requests under way (gate) and open connections (limitListener). Each
// refusal is counted in rpcproxy_over_capacity_total{limit}.

// Names of the limits, the "limit" label of rpcproxy_over_capacity_total.
const (
	limitConns          = "connections"
	limitConnsPerClient = "connections_per_client"
	limitRequests       = "requests"
	limitPerClient      = "requests_per_client"
	limitBuffered       = "buffered_bytes"
)

// budget is the memory that request bodies and buffered node answers may
// take, across requests: buffers reserve their capacity before they grow.
type budget struct {
	max  int64
	used atomic.Int64
}

// reserve takes n bytes from the budget, or nothing and false when that
// would go over it.
func (b *budget) reserve(n int64) bool {
	if b.used.Add(n) > b.max {
		b.used.Add(-n)
		return false
	}
	return true
}

func (b *budget) release(n int64) { b.used.Add(-n) }

// gate counts the requests under way, in total and per client.
type gate struct {
	max, perClient int

	mu      sync.Mutex
	total   int
	clients map[clientKey]int
}

func newGate(max, perClient int) *gate {
	return &gate{max: max, perClient: perClient, clients: map[clientKey]int{}}
}

// enter admits a request of client k, or names the limit it is over.
func (g *gate) enter(k clientKey) (over string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := g.clients[k]
	switch {
	case n >= g.perClient:
		return limitPerClient
	case g.total >= g.max:
		return limitRequests
	}
	g.clients[k] = n + 1
	g.total++
	return ""
}

func (g *gate) leave(k clientKey) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.total--
	if n := g.clients[k] - 1; n > 0 {
		g.clients[k] = n
	} else {
		delete(g.clients, k)
	}
}

func (g *gate) inFlight() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.total
}

// LimitListener returns ln with the proxy's connection caps: at most
// Config.MaxConns connections open at once, and at most
// Config.MaxConnsPerClient from one client address (IPv6: its
// Config.IPv6PrefixLen prefix). A connection over a cap is closed as soon
// as it is accepted, before anything is read from it. Peers in
// Config.TrustedProxies count only towards MaxConns: the clients behind
// them are told apart per request, by the request caps. Serve the proxy on
// the returned listener:
//
//	srv := &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
//	srv.Serve(p.LimitListener(ln))
func (p *Proxy) LimitListener(ln net.Listener) net.Listener {
	return &limitListener{Listener: ln, p: p, byAddr: map[netip.Addr]int{}}
}

type limitListener struct {
	net.Listener
	p *Proxy

	mu     sync.Mutex
	open   int
	byAddr map[netip.Addr]int
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		addr, perClient := l.p.connKey(c.RemoteAddr())
		over := ""
		l.mu.Lock()
		switch {
		case perClient && l.byAddr[addr] >= l.p.cfg.MaxConnsPerClient:
			over = limitConnsPerClient
		case l.open >= l.p.cfg.MaxConns:
			over = limitConns
		default:
			l.open++
			if perClient {
				l.byAddr[addr]++
			}
		}
		l.mu.Unlock()
		if over != "" {
			l.p.m.overCapacity(over)
			c.Close()
			continue
		}
		l.p.conns.Add(1)
		return &limitConn{Conn: c, l: l, addr: addr, perClient: perClient}, nil
	}
}

func (l *limitListener) release(addr netip.Addr, perClient bool) {
	l.mu.Lock()
	l.open--
	if perClient {
		if n := l.byAddr[addr] - 1; n > 0 {
			l.byAddr[addr] = n
		} else {
			delete(l.byAddr, addr)
		}
	}
	l.mu.Unlock()
	l.p.conns.Add(-1)
}

// connKey is the address a connection counts against, and whether it
// counts per client at all (not for a trusted proxy).
func (p *Proxy) connKey(a net.Addr) (netip.Addr, bool) {
	var addr netip.Addr
	if ta, ok := a.(*net.TCPAddr); ok {
		addr = ta.AddrPort().Addr().Unmap()
	} else {
		addr = peerAddr(a.String())
	}
	if len(p.cfg.TrustedProxies) > 0 && trusted(p.cfg.TrustedProxies, addr) {
		return addr, false
	}
	return p.maskIPv6(addr), true
}

// limitConn gives its slot back when closed (once).
type limitConn struct {
	net.Conn
	l         *limitListener
	addr      netip.Addr
	perClient bool
	once      sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.addr, c.perClient) })
	return err
}

// CloseWrite lets net/http's server half-close the connection after
// answering a request whose body it did not read (a refusal), so that the
// client gets the answer rather than a reset.
func (c *limitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
