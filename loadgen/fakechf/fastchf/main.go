// Command fastchf serves fakechf.Fast: canned Nchf answers at as little
// CPU per request as possible, to measure the load generator alone
// (`loadgen run --target http://ADDR --audit off`). It prints its address
// and serves until SIGINT or SIGTERM.
//
//	go run ./loadgen/fakechf/fastchf --listen 127.0.0.1:9700
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/chf-testbed/testbed/loadgen/fakechf"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "fastchf: unexpected argument %q\n", flag.Arg(0))
		os.Exit(2)
	}
	f, err := fakechf.StartFast(*listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fastchf:", err)
		os.Exit(1)
	}
	fmt.Println(f.Addr())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	f.Close()
	fmt.Fprintf(os.Stderr, "fastchf: %d requests served\n", f.Requests.Load())
}
