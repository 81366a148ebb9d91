// Command hostile is what a hostile tenant would put in the user image of
// a Job executor's runner Pod, for dev/test/cluster's hostile test. It is
// installed as the image's `pulumi`, with the real CLI beside it as
// pulumi-real. On the engine's run (the call with --event-log: the runner
// keeps that call's stderr in the engine log, the other calls' only when
// they fail) it tries to reach what a Stack's Pod must not: the
// controller's files, another namespace's Secrets, another Stack's state in
// PostgreSQL, another operation's spec and tree on the controller's runner
// channel. It prints one line, ReportPrefix and a JSON Report, to stderr
// and to a file under the temp directory, then execs the real CLI with the
// same arguments, so the operation goes on.
//
// The report holds outcomes only (an HTTP status, an SQLSTATE and the
// server's message, "absent"), never a value it read: the test looks for
// secret values in the engine log that carries it. Each attack has a
// control, the same request on what is the Pod's own, which must succeed:
// a refusal then says the attack was refused, not that the probe was broken.
//
// Its inputs come from the environment (the Stack's podTemplate env):
//
//	HOSTILE_CONTROLLER_PATHS  comma-separated paths of the controller's files
//	HOSTILE_OTHER_NAMESPACE   another tenant's namespace
//	HOSTILE_OTHER_SECRET      a Secret in it
//	HOSTILE_OTHER_DATABASE    another Stack's database, on the same server
//	HOSTILE_OTHER_OPERATION   another Stack's running operation
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lib/pq"
)

// ReportPrefix starts the report's line.
const ReportPrefix = "HOSTILE-REPORT "

// Report is what the attacks came to; the test reads it with the same
// field names. Every map is attack (or control) name → outcome.
type Report struct {
	// Operation is the Pod's own operation ID, from the runner's command line.
	Operation string `json:"operation"`
	// Username is who the API server says the Pod's token is.
	Username string `json:"username"`
	// Files: each controller path → "absent", "present" or an error.
	Files map[string]string `json:"files"`
	// Env: KUBECONFIG and the like → "unset" or "set".
	Env        map[string]string `json:"env"`
	Kubernetes map[string]string `json:"kubernetes"`
	Postgres   map[string]string `json:"postgres"`
	Channel    map[string]string `json:"channel"`
	Controls   map[string]string `json:"controls"`
}

const (
	tokenDir = "/var/run/secrets/kubernetes.io/serviceaccount"
	// LootName is the Secret the attacks try to create.
	LootName = "hostile-loot"
)

func main() {
	args := os.Args[1:]
	report := filepath.Join(os.TempDir(), "hostile-report.json")
	if slices.Contains(args, "--event-log") {
		if _, err := os.Stat(report); errors.Is(err, os.ErrNotExist) {
			line := attack()
			fmt.Fprintln(os.Stderr, ReportPrefix+line)
			_ = os.WriteFile(report, []byte(line+"\n"), 0o600)
		}
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "hostile:", err)
		os.Exit(2)
	}
	cli := filepath.Join(filepath.Dir(self), "pulumi-real")
	err = syscall.Exec(cli, append([]string{cli}, args...), os.Environ())
	fmt.Fprintln(os.Stderr, "hostile: exec", cli+":", err)
	os.Exit(2)
}

// attack runs every attack and returns the report as one JSON line.
func attack() string {
	r := Report{Files: map[string]string{}, Env: map[string]string{}, Kubernetes: map[string]string{},
		Postgres: map[string]string{}, Channel: map[string]string{}, Controls: map[string]string{}}
	controllerFiles(&r)
	kubernetes(&r)
	postgres(&r)
	channel(&r)
	out, _ := json.Marshal(r)
	return string(out)
}

// controllerFiles: the controller runs elsewhere; none of its files, nor a
// KUBECONFIG, may be in the Pod.
func controllerFiles(r *Report) {
	for _, p := range strings.Split(os.Getenv("HOSTILE_CONTROLLER_PATHS"), ",") {
		if p == "" {
			continue
		}
		_, err := os.Stat(p)
		switch {
		case err == nil:
			r.Files[p] = "present"
		case errors.Is(err, os.ErrNotExist):
			r.Files[p] = "absent"
		default:
			r.Files[p] = "error: " + errno(err)
		}
	}
	for _, k := range []string{"KUBECONFIG", "STACKPILOT_DATA_DIR"} {
		if _, ok := os.LookupEnv(k); ok {
			r.Env[k] = "set"
		} else {
			r.Env[k] = "unset"
		}
	}
}

// kubernetes: who the token is, and the other namespace's Secrets.
func kubernetes(r *Report) {
	api, err := newAPI()
	if err != nil {
		r.Username = "error: " + err.Error()
		return
	}
	r.Username = api.whoami()
	other, secret := os.Getenv("HOSTILE_OTHER_NAMESPACE"), os.Getenv("HOSTILE_OTHER_SECRET")
	own, _ := os.ReadFile(tokenDir + "/namespace")
	loot := fmt.Sprintf(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":%q},"stringData":{"x":"y"}}`, LootName)
	r.Controls["getOwnSecret"] = api.do("GET", "/api/v1/namespaces/"+string(own)+"/secrets/pulumi-passphrase", "")
	r.Kubernetes["getOtherSecret"] = api.do("GET", "/api/v1/namespaces/"+other+"/secrets/"+secret, "")
	r.Kubernetes["listOtherSecrets"] = api.do("GET", "/api/v1/namespaces/"+other+"/secrets", "")
	r.Kubernetes["listAllSecrets"] = api.do("GET", "/api/v1/secrets", "")
	r.Kubernetes["createSecretKubeSystem"] = api.do("POST", "/api/v1/namespaces/kube-system/secrets", loot)
	r.Kubernetes["createSecretOther"] = api.do("POST", "/api/v1/namespaces/"+other+"/secrets", loot)
}

type apiClient struct {
	base  string
	token string
	http  *http.Client
}

func newAPI() (*apiClient, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" {
		return nil, errors.New("no KUBERNETES_SERVICE_HOST")
	}
	token, err := os.ReadFile(tokenDir + "/token")
	if err != nil {
		return nil, fmt.Errorf("token: %s", errno(err))
	}
	client, err := tlsClient(tokenDir + "/ca.crt")
	if err != nil {
		return nil, err
	}
	return &apiClient{base: "https://" + host + ":" + port, token: strings.TrimSpace(string(token)), http: client}, nil
}

// whoami asks the API server who the token is (a SelfSubjectReview).
func (a *apiClient) whoami() string {
	body := `{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`
	resp, err := a.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", body)
	if err != nil {
		return "error: " + err.Error()
	}
	defer resp.Body.Close()
	var review struct {
		Status struct {
			UserInfo struct {
				Username string `json:"username"`
			} `json:"userInfo"`
		} `json:"status"`
	}
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return "error: " + strconv.Itoa(resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&review); err != nil {
		return "error: " + err.Error()
	}
	return review.Status.UserInfo.Username
}

// do returns the status code of the request, and nothing of its body.
func (a *apiClient) do(method, path, body string) string {
	resp, err := a.request(method, path, body)
	if err != nil {
		return "error: " + err.Error()
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return strconv.Itoa(resp.StatusCode)
}

func (a *apiClient) request(method, path, body string) (*http.Response, error) {
	req, err := http.NewRequest(method, a.base+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return a.http.Do(req)
}

// postgres: the other Stack's database, with the Pod's own role, from the
// backend URL the runner gives the CLI.
func postgres(r *Report) {
	own, err := url.Parse(os.Getenv("PULUMI_BACKEND_URL"))
	if err != nil || own.Scheme != "postgres" {
		r.Postgres["backend"] = "error: PULUMI_BACKEND_URL is not a postgres:// URL"
		return
	}
	q := own.Query()
	q.Set("connect_timeout", "10")
	own.RawQuery = q.Encode()
	other := *own
	other.Path = "/" + os.Getenv("HOSTILE_OTHER_DATABASE")
	r.Controls["readOwnState"] = readState(own.String())
	r.Postgres["readOtherState"] = readState(other.String())
}

// readState connects and counts pulumi_state's rows: "read" or where and
// how it was refused.
func readState(dsn string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := sql.Open("postgres", dsn)
	if err != nil {
		return "error: open"
	}
	defer db.Close()
	if err := db.PingContext(ctx); err != nil {
		return "connect: " + pqOutcome(err)
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM pulumi_state").Scan(&n); err != nil {
		return "select: " + pqOutcome(err)
	}
	return "read"
}

// pqOutcome is the SQLSTATE and the server's message, which name objects,
// never a password; any other error only by its kind.
func pqOutcome(err error) string {
	if pe, ok := errors.AsType[*pq.Error](err); ok {
		return string(pe.Code) + " " + pe.Message
	}
	return "error: " + errno(err)
}

// channel: the other operation's spec, tree and log on the controller's
// runner channel, with the Pod's own credential and with none.
func channel(r *Report) {
	args := runnerArgs()
	endpoint, ca, credFile, own := args["--endpoint"], args["--ca-file"], args["--credential-file"], args["--operation"]
	r.Operation = own
	if endpoint == "" {
		r.Channel["runner"] = "error: no runner with --endpoint among the ancestors"
		return
	}
	cred, err := os.ReadFile(credFile)
	if err != nil {
		r.Channel["credential"] = "error: " + errno(err)
		return
	}
	client, err := tlsClient(ca)
	if err != nil {
		r.Channel["ca"] = "error: " + err.Error()
		return
	}
	other := os.Getenv("HOSTILE_OTHER_OPERATION")
	get := func(method, id, what, credential string) string {
		req, err := http.NewRequest(method, endpoint+"/v1/operations/"+url.PathEscape(id)+"/"+what, bytes.NewReader(nil))
		if err != nil {
			return "error: request"
		}
		if credential != "" {
			req.Header.Set("Authorization", "Bearer "+credential)
		}
		resp, err := client.Do(req)
		if err != nil {
			return "error: " + err.Error()
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return strconv.Itoa(resp.StatusCode)
	}
	c := strings.TrimSpace(string(cred))
	r.Controls["getOwnSpec"] = get("GET", own, "spec", c)
	r.Channel["otherSpec"] = get("GET", other, "spec", c)
	r.Channel["otherArtifact"] = get("GET", other, "artifact", c)
	r.Channel["otherSpecNoCredential"] = get("GET", other, "spec", "")
	r.Channel["otherArtifactNoCredential"] = get("GET", other, "artifact", "")
	// An empty chunk at offset 0: were it let through, it would change nothing.
	r.Channel["otherLog"] = get("POST", other, "log?offset=0", c)
}

// runnerArgs are the flags of the nearest ancestor whose command line has
// --endpoint: the runner that started this process.
func runnerArgs() map[string]string {
	pid := os.Getppid()
	for range 8 {
		if pid <= 1 {
			break
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil {
			args := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
			if slices.Contains(args, "--endpoint") {
				out := map[string]string{}
				for i := 0; i+1 < len(args); i++ {
					if strings.HasPrefix(args[i], "--") {
						out[args[i]] = args[i+1]
					}
				}
				return out
			}
		}
		pid = parentOf(pid)
	}
	return map[string]string{}
}

// parentOf is pid's parent, from /proc/<pid>/stat; 0 when unknown.
func parentOf(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// pid (comm) state ppid ...: comm may hold spaces, so after the last ')'.
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(fields[1])
	return ppid
}

func tlsClient(caFile string) (*http.Client, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("CA: %s", errno(err))
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("CA: no certificate")
	}
	return &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
	}, nil
}

// errno is a file error's cause without its path.
func errno(err error) string {
	if pe, ok := errors.AsType[*os.PathError](err); ok {
		return pe.Err.Error()
	}
	return err.Error()
}
