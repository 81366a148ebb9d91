package daemon

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// FreePort returns a port of 127.0.0.1 that was free just now, for a daemon to
// listen on.
//
// The port comes from below the kernel's ephemeral range on purpose: a port
// the kernel handed out for ":0" is handed out again to the next ":0"
// listener or outgoing connection of any process, and with several test
// packages running at once one of them took a kube-apiserver's port in the
// moment between FreePort and the bind. Below the ephemeral range only
// another FreePort caller can collide, and a random pick over thousands of
// ports, never repeated within this process, makes that rare.
func FreePort() (int, error) {
	lo, hi := pickRange()
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 200 {
		port := lo + rand.IntN(hi-lo)
		if handedOut[port] {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		l.Close()
		handedOut[port] = true
		return port, nil
	}
	// Every try was taken: fall back on the kernel's choice.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("no free port on 127.0.0.1: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

var (
	portsMu   sync.Mutex
	handedOut = map[int]bool{}
)

// pickRange is the range FreePort draws from: [10000, start of the ephemeral
// range), or [10000, 32768) when the kernel does not say.
func pickRange() (lo, hi int) {
	lo, hi = 10000, 32768
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return lo, hi
	}
	fields := strings.Fields(string(data))
	if len(fields) != 2 {
		return lo, hi
	}
	start, err := strconv.Atoi(fields[0])
	if err != nil || start <= lo+1000 {
		return lo, hi
	}
	return lo, start
}
