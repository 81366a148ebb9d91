package analyzer

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"reflect"
	"sync"
	"syscall"

	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/stackpilot/stackpilot/internal/policy"
)

// Main is the analyzer process: it reads the Bundle, compiles its policies
// (a policy that does not compile stops the operation: the controller
// refuses such a policy before, so this is a bug or a race, and a guard
// that does not load must not let everything through), serves Pulumi's
// Analyzer service on a free port of 127.0.0.1, and prints the port, which
// is how the engine finds it. Pulumi's arguments (the engine's address,
// logging and tracing flags) are not needed. It returns the exit code.
func Main() int {
	if err := serve(); err != nil {
		fmt.Fprintln(os.Stderr, "stackpilot policy analyzer:", err)
		return 1
	}
	return 0
}

// serve runs the gRPC server until the engine cancels or kills the plugin.
// It does without Pulumi's rpcutil, whose imports would more than double
// what the runner's binary links of Pulumi.
func serve() error {
	b, err := ReadBundle()
	if err != nil {
		return err
	}
	srv, err := newServer(b)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	gs := grpc.NewServer(grpc.MaxRecvMsgSize(maxMessageBytes))
	pulumirpc.RegisterAnalyzerServer(gs, srv)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case <-stop:
		case <-srv.cancel:
		}
		gs.GracefulStop()
	}()
	// The first line on stdout is the port; nothing may come before it.
	fmt.Printf("%d\n", ln.Addr().(*net.TCPAddr).Port)
	return gs.Serve(ln)
}

// maxMessageBytes is what the engine may send in one request: a resource's
// inputs can be large (Pulumi allows 400 MiB per message).
const maxMessageBytes = 400 << 20

type server struct {
	pulumirpc.UnimplementedAnalyzerServer
	bundle   Bundle
	compiled []*policy.Compiled
	cancel   chan bool

	mu     sync.Mutex
	dryRun bool
}

func newServer(b Bundle) (*server, error) {
	s := &server{bundle: b, cancel: make(chan bool, 1)}
	for _, p := range b.Policies {
		c, err := policy.Compile(p)
		if err != nil {
			return nil, err
		}
		s.compiled = append(s.compiled, c)
	}
	return s, nil
}

func (s *server) Handshake(context.Context, *pulumirpc.AnalyzerHandshakeRequest) (*pulumirpc.AnalyzerHandshakeResponse, error) {
	return &pulumirpc.AnalyzerHandshakeResponse{}, nil
}

// ConfigureStack tells a preview from an update: a rule a preview cannot
// decide (an input not known yet) is reported there, and blocks only in
// the update.
func (s *server) ConfigureStack(_ context.Context, req *pulumirpc.AnalyzerStackConfigureRequest) (*pulumirpc.AnalyzerStackConfigureResponse, error) {
	s.mu.Lock()
	s.dryRun = req.GetDryRun()
	s.mu.Unlock()
	return &pulumirpc.AnalyzerStackConfigureResponse{}, nil
}

func (s *server) GetPluginInfo(context.Context, *emptypb.Empty) (*pulumirpc.PluginInfo, error) {
	return &pulumirpc.PluginInfo{Version: PackVersion}, nil
}

// GetAnalyzerInfo lists every rule as a policy of the pack, so that Pulumi's
// summary names the rule a violation broke.
func (s *server) GetAnalyzerInfo(context.Context, *emptypb.Empty) (*pulumirpc.AnalyzerInfo, error) {
	info := &pulumirpc.AnalyzerInfo{Name: PackName, DisplayName: "Stackpilot policies", Version: PackVersion}
	for _, p := range s.bundle.Policies {
		for _, r := range p.Rules {
			// A disabled rule is left out: Pulumi's summaries know no
			// disabled policy of a binary pack.
			level := pulumirpc.EnforcementLevel_MANDATORY
			switch r.Enforcement {
			case policy.Advisory:
				level = pulumirpc.EnforcementLevel_ADVISORY
			case policy.Disabled:
				continue
			}
			info.Policies = append(info.Policies, &pulumirpc.PolicyInfo{
				Name:             p.RuleName(r.Name),
				Description:      fmt.Sprintf("%s rule %s", p, r.Name),
				EnforcementLevel: level,
			})
		}
	}
	return info, nil
}

func (s *server) Cancel(context.Context, *emptypb.Empty) (*emptypb.Empty, error) {
	select {
	case s.cancel <- true:
	default:
	}
	return &emptypb.Empty{}, nil
}

// Analyze evaluates every policy on one resource registration. An input
// that cannot be read is an error, which fails the operation: a guard that
// cannot look must not let the change through.
func (s *server) Analyze(ctx context.Context, req *pulumirpc.AnalyzeRequest) (*pulumirpc.AnalyzeResponse, error) {
	res, err := s.resource(req)
	if err != nil {
		return nil, fmt.Errorf("stackpilot policy analyzer: %s: %w", req.GetUrn(), err)
	}
	s.mu.Lock()
	dryRun := s.dryRun
	s.mu.Unlock()
	resp := &pulumirpc.AnalyzeResponse{}
	for _, c := range s.compiled {
		for _, f := range c.Evaluate(ctx, s.bundle.Stack, res) {
			resp.Diagnostics = append(resp.Diagnostics, diagnostic(c.Policy, f, dryRun))
		}
	}
	return resp, nil
}

// diagnostic is a finding as Pulumi reports it.
func diagnostic(p policy.Policy, f policy.Finding, dryRun bool) *pulumirpc.AnalyzeDiagnostic {
	level := pulumirpc.EnforcementLevel_ADVISORY
	if f.Level(dryRun) == policy.Mandatory {
		level = pulumirpc.EnforcementLevel_MANDATORY
	}
	return &pulumirpc.AnalyzeDiagnostic{
		PolicyName:        p.RuleName(f.Rule),
		PolicyPackName:    PackName,
		PolicyPackVersion: PackVersion,
		Description:       fmt.Sprintf("%s rule %s", p, f.Rule),
		Message:           f.Text(),
		EnforcementLevel:  level,
		Urn:               f.URN,
	}
}

// resource turns the engine's request into what rules read: inputs with
// unknowns and secrets marked, and the operation from the prior state.
func (s *server) resource(req *pulumirpc.AnalyzeRequest) (policy.Resource, error) {
	r := policy.Resource{Type: req.GetType(), Name: req.GetName(), URN: req.GetUrn(), Inputs: decodeStruct(req.GetProperties())}
	if p := req.GetProvider(); p != nil {
		r.Provider = policy.Provider{Type: p.GetType(), Name: p.GetName(), URN: p.GetUrn(), Inputs: decodeStruct(p.GetProperties())}
	}
	if s.bundle.Prior != nil {
		raw, existed := s.bundle.Prior[r.URN]
		old, err := policy.DecodeInputs(raw, nil)
		if err != nil {
			return r, fmt.Errorf("the prior inputs: %w", err)
		}
		if existed {
			r.OldInputs = old
		}
		switch planned, ok := s.bundle.Ops[r.URN]; {
		case ok:
			r.Op = planned
		case !existed:
			r.Op = string(policy.Create)
		case reflect.DeepEqual(unwrap(r.Inputs), unwrap(old)):
			r.Op = policy.Same
		default:
			r.Op = string(policy.Update)
		}
	}
	return r, nil
}

// unwrap is inputs without the markers, as the prior state holds them.
func unwrap(v any) any {
	switch v := v.(type) {
	case policy.Secret:
		return unwrap(v.Value)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = unwrap(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = unwrap(e)
		}
		return out
	}
	return v
}
