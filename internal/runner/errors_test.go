package runner

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestClassify(t *testing.T) {
	op := func(err error) error { return stepErr(phaseOperation, err) }
	for _, tc := range []struct {
		name    string
		f       failure
		outcome Outcome
		class   ErrorClass
	}{
		{"timeout wins", failure{err: op(errors.New("x")), timedOut: true}, OutcomeFailed, ErrorTimeout},
		{"cancelled", failure{err: op(errors.New("x")), cancelled: true}, OutcomeCancelled, ErrorNone},
		{"bad spec", failure{err: stepErr(phaseSpec, &SpecError{Reason: "x"})}, OutcomeFailed, ErrorInternal},
		{"bad config", failure{err: stepErr(phaseProject, &ConfigError{Key: "k", Reason: "x"})}, OutcomeFailed, ErrorProgram},
		{"no pulumi", failure{err: stepErr(phaseCommand, errors.New("exec: not found"))}, OutcomeFailed, ErrorInternal},
		{"diagnostics", failure{err: op(errors.New("exit 255")), diags: []string{"oops"}}, OutcomeFailed, ErrorProgram},
		{"provider refused", failure{err: op(errors.New("exit 255")),
			diags: []string{`configmaps "x" is forbidden: User "y" cannot create`}}, OutcomeFailed, ErrorAuth},
		{"service 401", failure{err: stepErr(phaseStack, errors.New("[401] Unauthorized"))}, OutcomeFailed, ErrorAuth},
		{"passphrase", failure{err: stepErr(phaseConfig, errors.New("incorrect passphrase"))}, OutcomeFailed, ErrorAuth},
		{"status code in a name is not auth", failure{err: op(errors.New("exit")),
			diags: []string{"app-4013 failed"}}, OutcomeFailed, ErrorProgram},
		{"stack phase", failure{err: stepErr(phaseStack, errors.New("something odd"))}, OutcomeFailed, ErrorBackend},
		{"backend during the run", failure{err: op(errors.New("failed to load checkpoint: connection refused"))},
			OutcomeFailed, ErrorBackend},
		{"error lines without diagnostics", failure{err: op(errors.New("exit")), stderr: "error: Pulumi.yaml is bad\n"},
			OutcomeFailed, ErrorProgram},
		{"nothing known", failure{err: op(errors.New("exit status 2"))}, OutcomeFailed, ErrorInternal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			outcome, class := classify(tc.f)
			g.Expect(outcome).To(Equal(tc.outcome))
			g.Expect(class).To(Equal(tc.class))
		})
	}
}

func TestMessage(t *testing.T) {
	g := NewWithT(t)
	g.Expect(message(failure{err: errors.New("x"), diags: []string{"a", "b", "a"}}, ErrorProgram)).To(Equal("a\nb"))
	g.Expect(message(failure{err: errors.New("x"), stderr: "noise\nerror: \x1b[31mbad thing\x1b[0m\n"}, ErrorProgram)).
		To(Equal("bad thing"))
	g.Expect(message(failure{err: errors.New("failed\ncode: 1\nstdout: \nstderr: error: from the CLI\n")}, ErrorBackend)).
		To(Equal("from the CLI"))
	g.Expect(message(failure{err: errors.New("first\nsecond")}, ErrorInternal)).To(Equal("first"))
	g.Expect(message(failure{err: errors.New("x"), timedOut: true, timeout: Duration(time.Minute),
		diags: []string{"half done"}}, ErrorTimeout)).To(Equal("operation timed out after 1m0s\nhalf done"))
	long := message(failure{diags: []string{strings.Repeat("é", maxMessage)}}, ErrorProgram)
	g.Expect(len(long)).To(BeNumerically("<=", maxMessage))
	g.Expect(strings.ToValidUTF8(long, "?")).To(Equal(long))
}

func TestRedact(t *testing.T) {
	g := NewWithT(t)
	spec := Spec{
		Env: map[string]string{"PULUMI_CONFIG_PASSPHRASE": "pass-phrase-1", "FLAG": "on", "EMPTY": ""},
		Config: []ConfigValue{
			{Key: "token", Value: "tok-123456", Secret: true},
			{Key: "db", Value: map[string]any{"pw": "hunter2"}, Secret: true},
			{Key: "visible", Value: "shown-value"},
		},
	}
	got := Redact(spec, "pass-phrase-1 tok-123456 hunter2 shown-value on onion {\"pw\":\"hunter2\"}")
	g.Expect(got).To(Equal("[secret] [secret] [secret] shown-value [secret] onion [secret]"))
}

func TestContextFailure(t *testing.T) {
	g := NewWithT(t)
	parent := context.Background()
	op, cancel := context.WithTimeout(parent, time.Nanosecond)
	defer cancel()
	<-op.Done()
	timedOut, cancelled := contextFailure(parent, op)
	g.Expect(timedOut).To(BeTrue())
	g.Expect(cancelled).To(BeFalse())

	p2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	timedOut, cancelled = contextFailure(p2, p2)
	g.Expect(timedOut).To(BeFalse())
	g.Expect(cancelled).To(BeTrue())

	// Timed out first, then told to stop (the executor's deadline): a timeout.
	p3, cancel3 := context.WithCancel(context.Background())
	op3, cancelOp3 := context.WithTimeout(p3, time.Nanosecond)
	defer cancelOp3()
	<-op3.Done()
	cancel3()
	timedOut, cancelled = contextFailure(p3, op3)
	g.Expect(timedOut).To(BeTrue())
	g.Expect(cancelled).To(BeFalse())
}

func TestRunNeverPanicsAndValidates(t *testing.T) {
	g := NewWithT(t)
	res := Run(context.Background(), Spec{ID: "op1", Type: "explode", WorkDir: "/w", StackName: "s", Backend: "file:///x"})
	g.Expect(res.Outcome).To(Equal(OutcomeFailed))
	g.Expect(res.ErrorClass).To(Equal(ErrorInternal))
	g.Expect(res.Message).To(ContainSubstring(`unknown operation type "explode"`))
	g.Expect(res.APIVersion).To(Equal(APIVersion))
	g.Expect(res.ID).To(Equal("op1"))

	res = Run(context.Background(), Spec{ID: "op2", Type: OpUp, WorkDir: t.TempDir(), StackName: "s", Backend: "file:///x"})
	g.Expect(res.ErrorClass).To(Equal(ErrorProgram), "no Pulumi.yaml")
}
