// Command netprobe is the test workload that checks the one-node cluster's Pod
// network from inside a Pod: it reports its addresses, whether it reaches a
// TCP server (and what that server said), what the API server answers to a
// GET with the Pod's token, and how connections to addresses that must be
// unreachable fail, and how the runtime confines it (seccomp mode, no new
// privileges, effective capabilities, user). It writes one JSON object to stdout and to the
// termination message (/dev/termination-log), and exits 0 whatever it found:
// the test judges.
package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// Report is what netprobe found; the test reads it with the same field names.
type Report struct {
	Addrs       []string          `json:"addrs"`
	TCP         string            `json:"tcp"`
	API         string            `json:"api"`
	Unreachable map[string]string `json:"unreachable"`
	// Status holds /proc/self/status's Seccomp, NoNewPrivs, CapEff and Uid lines.
	Status map[string]string `json:"status"`
}

func main() {
	tcp := flag.String("tcp", "", "host:port of a server that sends one line")
	api := flag.String("api", "", "URL to GET with the bearer token")
	token := flag.String("token", "", "file with the bearer token")
	ca := flag.String("ca", "", "file with the CA that signed the API server's certificate")
	unreachable := flag.String("unreachable", "", "comma-separated host:port that must not connect")
	flag.Parse()

	r := Report{Unreachable: map[string]string{}}
	r.Addrs = addrs()
	r.Status = status()
	if *tcp != "" {
		r.TCP = readLine(*tcp)
	}
	if *api != "" {
		r.API = get(*api, *token, *ca)
	}
	for _, a := range strings.Split(*unreachable, ",") {
		if a == "" {
			continue
		}
		conn, err := net.DialTimeout("tcp", a, 5*time.Second)
		if err != nil {
			r.Unreachable[a] = "error: " + err.Error()
			continue
		}
		conn.Close()
		r.Unreachable[a] = "connected"
	}
	out, _ := json.Marshal(r)
	fmt.Println(string(out))
	_ = os.WriteFile("/dev/termination-log", out, 0o644)
}

func status() map[string]string {
	out := map[string]string{}
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		out["error"] = err.Error()
		return out
	}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && (k == "Seccomp" || k == "NoNewPrivs" || k == "CapEff" || k == "Uid") {
			out[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	return out
}

// addrs are the Pod's IPv4 addresses but loopback.
func addrs() []string {
	as, err := net.InterfaceAddrs()
	if err != nil {
		return []string{"error: " + err.Error()}
	}
	var out []string
	for _, a := range as {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			out = append(out, n.IP.String())
		}
	}
	return out
}

func readLine(addr string) string {
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return "error: " + err.Error()
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return "error: " + err.Error()
	}
	return "ok: " + strings.TrimSpace(line)
}

func get(url, tokenFile, caFile string) string {
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		return "error: " + err.Error()
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return "error: " + err.Error()
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return "error: no certificate in " + caFile
	}
	client := &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
	}
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return "error: " + err.Error()
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := client.Do(req)
	if err != nil {
		return "error: " + err.Error()
	}
	resp.Body.Close()
	return fmt.Sprintf("status %d", resp.StatusCode)
}
