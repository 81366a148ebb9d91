// Command pause is the sandbox ("pause") image of the one-node cluster: it holds
// a Pod's namespaces and waits for SIGTERM. With -sleep it exits 0 after that
// long instead, which makes it a one-shot test workload too.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	sleep := flag.Duration("sleep", 0, "exit 0 after this long instead of waiting for a signal")
	flag.Parse()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	if *sleep > 0 {
		select {
		case <-time.After(*sleep):
			fmt.Println("pause: done")
			return
		case <-sig:
			return
		}
	}
	<-sig
}
