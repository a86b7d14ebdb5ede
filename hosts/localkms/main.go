// Command localkms runs the local-kms AWS KMS emulator
// (github.com/nsmithuk/local-kms) on a loopback address, for evmpay's tests
// of the AWS KMS signer and of sealed secrets. It is its own Go module, so
// that the emulator never becomes a requirement of the evmpay module.
//
//	go run . --data /tmp/kms [--addr 127.0.0.1:0]
//
// It prints "listening on http://127.0.0.1:PORT" once it accepts requests
// (the AWS SDK's BaseEndpoint), and stops on SIGINT or SIGTERM. Keys live
// in the --data directory, so a restart on the same directory keeps them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	lkms "github.com/nsmithuk/local-kms/src"
	"github.com/nsmithuk/local-kms/src/config"
	"github.com/nsmithuk/local-kms/src/data"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "localkms:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := flag.String("addr", "127.0.0.1:0", "listen address (loopback; port 0 picks a free one)")
	dir := flag.String("data", "", "directory of the emulator's key database (required)")
	region := flag.String("region", "eu-west-2", "region in the key ARNs")
	account := flag.String("account", "111122223333", "account id in the key ARNs")
	flag.Parse()
	if *dir == "" {
		return errors.New("--data is required")
	}
	path, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	config.AWSRegion, config.AWSAccountId, config.DatabasePath = *region, *account, path
	db := data.NewDatabase(path)
	defer db.Close()

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lkms.HandleRequest(w, r, db)
	})}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	fmt.Printf("listening on http://%s\n", ln.Addr())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
