package daemon

import "net"

// FreePort returns a port of 127.0.0.1 that was free just now, for a daemon to
// listen on. Another process may take it before the daemon binds it; on a
// test machine that is rare enough to accept.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
