// Command rpcproxy-load measures what the RPC proxy costs on loopback.
//
// It starts, in this process, an upstream that answers every JSON-RPC call
// instantly (or after -upstream-delay, or uses the node at -upstream) and
// an rpcproxy.Proxy in front of it, both on 127.0.0.1:0. A
// wrk-like load generator (raw HTTP/1.1 keep-alive connections, one request in
// flight per connection) then runs four fixed-length phases: direct to the
// upstream and through the proxy with -conns connections (throughput at
// saturation), then both again with one connection (latency). It prints both
// throughputs and their ratio, the added median latency, and the TIME_WAIT
// sockets before and after, which show whether upstream connections stayed
// pooled.
//
//	go run ./hosts/rpcproxy-load -duration 10s
//	go run ./hosts/rpcproxy-load -upstream-delay 1ms   # a node that takes time
//	go run ./hosts/rpcproxy-load -upstream http://127.0.0.1:PORT   # payd devchain, geth …
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/evmpay/evmpay/rpcproxy"
	"golang.org/x/time/rate"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		log.Fatal(err)
	}
}

const (
	reqBody  = `{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}`
	respBody = `{"jsonrpc":"2.0","id":1,"result":"0x4b7"}`
)

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("rpcproxy-load", flag.ContinueOnError)
	duration := fs.Duration("duration", 5*time.Second, "length of each saturation phase (each latency phase runs half as long)")
	conns := fs.Int("conns", 32, "connections in the saturation phases")
	warmup := fs.Duration("warmup", 500*time.Millisecond, "unmeasured load before each phase")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the proxied saturation phase to this file")
	serveOnly := fs.Bool("serve", false, "only start the servers, print their addresses and run until interrupted (for wrk: scripts/bench-rpcproxy-wrk.sh)")
	delay := fs.Duration("upstream-delay", 0, "the built-in upstream answers after this long (a node's own time per call)")
	external := fs.String("upstream", "", "measure against this node (http://host:port) instead of the built-in upstream")
	if err := fs.Parse(args); err != nil {
		return err
	}

	// Two listeners with the same handler: one is measured directly, the
	// other sits behind the proxy, so that sockets on its port are the
	// proxy's upstream connections only. An external node is both.
	handler := http.HandlerFunc(instant)
	if *delay > 0 {
		handler = func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(*delay)
			instant(w, r)
		}
	}
	var upAddr, directAddr string
	if *external != "" {
		u, err := url.Parse(*external)
		if err != nil || u.Host == "" {
			return fmt.Errorf("-upstream %q: want http://host:port", *external)
		}
		upAddr, directAddr = u.Host, u.Host
	} else {
		upstream, addr, err := serve(handler)
		if err != nil {
			return err
		}
		defer upstream.Close()
		direct, daddr, err := serve(handler)
		if err != nil {
			return err
		}
		defer direct.Close()
		upAddr, directAddr = addr, daddr
	}
	p, err := rpcproxy.New("http://"+upAddr, rpcproxy.Config{
		// Rate limiting stays on (one bucket, as every request comes from
		// 127.0.0.1) but never refuses: the cost of the check is measured.
		Rate:  rate.Limit(1e9),
		Burst: 1 << 30,
	})
	if err != nil {
		return err
	}
	defer p.CloseIdleConnections()
	front, proxyAddr, err := serve(p)
	if err != nil {
		return err
	}
	defer front.Close()

	if *serveOnly {
		fmt.Fprintf(stdout, "direct http://%s\nproxy http://%s\n", directAddr, proxyAddr)
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		<-ctx.Done()
		return nil
	}

	_, upPort, _ := net.SplitHostPort(upAddr)
	fmt.Fprintf(stdout, "rpcproxy-load: GOMAXPROCS=%d NumCPU=%d %s; upstream %s (direct copy %s, delay %s), proxy %s; body %d bytes\n",
		runtime.GOMAXPROCS(0), runtime.NumCPU(), runtime.Version(), upAddr, directAddr, *delay, proxyAddr, len(reqBody))
	twBefore := timeWait("")
	fmt.Fprintf(stdout, "TIME_WAIT sockets before: %d (ss -tan state time-wait)\n", twBefore)

	directRes, err := phase(directAddr, *conns, *duration, *warmup, "")
	if err != nil {
		return fmt.Errorf("direct: %w", err)
	}
	proxied, err := phase(proxyAddr, *conns, *duration, *warmup, *cpuProfile)
	if err != nil {
		return fmt.Errorf("proxy: %w", err)
	}
	upConns := established(upPort)
	direct1, err := phase(directAddr, 1, *duration/2, *warmup, "")
	if err != nil {
		return fmt.Errorf("direct, 1 connection: %w", err)
	}
	proxied1, err := phase(proxyAddr, 1, *duration/2, *warmup, "")
	if err != nil {
		return fmt.Errorf("proxy, 1 connection: %w", err)
	}
	twUpstream := timeWait(upPort)
	twAfter := timeWait("")

	fmt.Fprintf(stdout, "\n%-28s %12s %10s %10s %10s %10s\n", "phase", "req/s", "p50", "p99", "requests", "CPU/req")
	for _, r := range []struct {
		name string
		res  result
	}{
		{fmt.Sprintf("direct, %d conns", *conns), directRes},
		{fmt.Sprintf("proxy,  %d conns", *conns), proxied},
		{"direct, 1 conn", direct1},
		{"proxy,  1 conn", proxied1},
	} {
		fmt.Fprintf(stdout, "%-28s %12.0f %10s %10s %10d %10s\n", r.name, r.res.rps(), r.res.pct(50), r.res.pct(99), r.res.n(), r.res.cpuPerReq())
	}
	fmt.Fprintf(stdout, "\nCPU per request at %d conns: direct %s, proxied %s (the proxy's own: %s); "+
		"when CPU is the limit, proxy/direct throughput ≈ %.1f%% (machine-load independent estimate)\n",
		*conns, directRes.cpuPerReq(), proxied.cpuPerReq(), proxied.cpuPerReq()-directRes.cpuPerReq(),
		100*float64(directRes.cpuPerReq())/float64(proxied.cpuPerReq()))
	fmt.Fprintf(stdout, "\nthroughput ratio proxy/direct at %d conns: %.1f%%\n",
		*conns, 100*proxied.rps()/directRes.rps())
	fmt.Fprintf(stdout, "added median latency at 1 conn: %s (proxy p50 %s - direct p50 %s; target <= 100µs)\n",
		(proxied1.pct(50) - direct1.pct(50)).Round(time.Microsecond), proxied1.pct(50), direct1.pct(50))
	fmt.Fprintf(stdout, "proxy->upstream connections open after the %d-conn phase: %d; sockets in TIME_WAIT on the upstream port after all phases: %d\n",
		*conns, upConns, twUpstream)
	fmt.Fprintf(stdout, "TIME_WAIT sockets after: %d (before: %d; the load generator itself closes 2×(%d+1) client connections)\n",
		twAfter, twBefore, *conns)
	return nil
}

// instant is the upstream: it answers every request at once with a fixed
// JSON-RPC result.
func instant(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	h := w.Header()
	h["Content-Type"] = contentType
	h["Content-Length"] = contentLength
	_, _ = io.WriteString(w, respBody)
}

var (
	contentType   = []string{"application/json"}
	contentLength = []string{strconv.Itoa(len(respBody))}
)

func serve(h http.Handler) (*http.Server, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return srv, ln.Addr().String(), nil
}

type result struct {
	elapsed time.Duration
	lat     []time.Duration // sorted
	cpu     time.Duration   // the process's CPU time (user+system) over the measured part
}

// cpuPerReq is the process's CPU time per measured request: load
// generator, upstream and (in the proxied phases) proxy together. Unlike
// req/s it hardly depends on what else the machine is running.
func (r result) cpuPerReq() time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	return r.cpu / time.Duration(len(r.lat))
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (r result) n() int       { return len(r.lat) }
func (r result) rps() float64 { return float64(len(r.lat)) / r.elapsed.Seconds() }
func (r result) pct(p float64) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	return r.lat[min(len(r.lat)-1, int(float64(len(r.lat))*p/100))]
}

// phase runs conns workers against addr for warmup+d and measures the last d.
func phase(addr string, conns int, d, warmup time.Duration, cpuProfile string) (result, error) {
	request := []byte("POST / HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(reqBody)) + "\r\n\r\n" + reqBody)
	ctx, cancel := context.WithTimeout(context.Background(), warmup+d)
	defer cancel()
	measureFrom := time.Now().Add(warmup)

	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return result{}, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return result{}, err
		}
		defer pprof.StopCPUProfile()
	}
	cpuFrom := make(chan time.Duration, 1)
	go func() {
		time.Sleep(time.Until(measureFrom))
		cpuFrom <- processCPU()
	}()
	var wg sync.WaitGroup
	lats := make([][]time.Duration, conns)
	errs := make([]error, conns)
	for i := range conns {
		wg.Go(func() { lats[i], errs[i] = worker(ctx, addr, request, measureFrom) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return result{}, err
	}
	cpu := processCPU() - <-cpuFrom
	all := slices.Concat(lats...)
	slices.Sort(all)
	return result{elapsed: d, lat: all, cpu: cpu}, nil
}

// worker keeps one connection busy with one request at a time until ctx ends.
func worker(ctx context.Context, addr string, request []byte, measureFrom time.Time) ([]time.Duration, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	lat := make([]time.Duration, 0, 1<<16)
	br := bufio.NewReaderSize(c, 4096)
	for ctx.Err() == nil {
		start := time.Now()
		if _, err := c.Write(request); err != nil {
			return nil, err
		}
		if err := readResponse(br); err != nil {
			return nil, err
		}
		if start.After(measureFrom) {
			lat = append(lat, time.Since(start))
		}
	}
	return lat, nil
}

// readResponse reads one HTTP/1.1 response with a Content-Length and a 200.
func readResponse(br *bufio.Reader) error {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(line, []byte("HTTP/1.1 200 ")) {
		return fmt.Errorf("unexpected status line %q", line)
	}
	length := -1
	for {
		line, err = br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(line) <= 2 {
			break
		}
		if len(line) > 16 && bytes.EqualFold(line[:15], []byte("Content-Length:")) {
			length, err = strconv.Atoi(string(bytes.TrimSpace(line[15:])))
			if err != nil {
				return err
			}
		}
	}
	if length < 0 {
		return errors.New("response without Content-Length")
	}
	_, err = br.Discard(length)
	return err
}

// timeWait counts sockets in TIME_WAIT: all of them with `ss -tan state
// time-wait` when port is "", else those with port on either end (read from
// /proc/net/tcp*).
func timeWait(port string) int {
	if port == "" {
		out, err := exec.Command("ss", "-Htan", "state", "time-wait").Output()
		if err == nil {
			return strings.Count(string(out), "\n")
		}
	}
	return countSockets("06", port)
}

// established counts ESTABLISHED sockets whose remote port is port (the
// proxy's side of its upstream connections).
func established(port string) int { return countSockets("01", port) / 2 }

func countSockets(state, port string) int {
	hexPort := ""
	if port != "" {
		p, _ := strconv.Atoi(port)
		hexPort = fmt.Sprintf(":%04X", p)
	}
	n := 0
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fields := strings.Fields(line)
			if len(fields) < 4 || fields[3] != state {
				continue
			}
			if hexPort == "" || strings.HasSuffix(fields[1], hexPort) || strings.HasSuffix(fields[2], hexPort) {
				n++
			}
		}
	}
	return n
}
