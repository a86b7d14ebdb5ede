package nodes_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"

	"github.com/evmpay/evmpay/hosts/evmpaytest/simchain"
	"github.com/evmpay/evmpay/rpcproxy"
	"github.com/evmpay/evmpay/rpcproxy/nodes"
)

// A pool of two nodes of chain 1337, one of them down: the check says so,
// and go-ethereum's client reads through the pool from the other.
func Example() {
	sim := simchain.NewBackend(types.GenesisAlloc{}, simchain.HTTP("eth"))
	defer sim.Close()
	sim.Commit()
	sim.Commit()
	live := sim.HTTPURL()
	down := "http://127.0.0.1:" + strconv.Itoa(unusedPort()) // nothing listens there

	pool, err := nodes.New([]string{down, live}, nodes.Config{ChainID: 1337})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := pool.Check(ctx); err != nil { // at least one node is usable
		panic(err)
	}
	go pool.Run(ctx) // checks every node every second

	rc, err := pool.Client(ctx)
	if err != nil {
		panic(err)
	}
	defer rc.Close()
	head, err := ethclient.NewClient(rc).BlockNumber(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("head:", head)
	for i, s := range pool.Status() {
		fmt.Printf("node %d: up=%t problem=%q current=%t\n", i+1, s.Up, s.Problem, s.Current)
	}
	// Output:
	// head: 2
	// node 1: up=false problem="down" current=false
	// node 2: up=true problem="" current=true
}

// The RPC proxy in front of several nodes: the pool is its upstream.
func Example_rpcProxy() {
	pool, err := nodes.New([]string{"http://10.0.0.1:8545", "http://10.0.0.2:8545"}, nodes.Config{ChainID: 262144})
	if err != nil {
		panic(err)
	}
	go pool.Run(context.Background())
	p, err := rpcproxy.New("", rpcproxy.Config{Upstream: pool, Rate: 20, Burst: 40})
	if err != nil {
		panic(err)
	}
	srv := &http.Server{Addr: "127.0.0.1:8546", Handler: p, ReadHeaderTimeout: 10 * time.Second}
	_ = srv.ListenAndServe()
}

func unusedPort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
