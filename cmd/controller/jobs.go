package main

import (
	"fmt"
	"path/filepath"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/internal/controllers/stack"
	"github.com/stackpilot/stackpilot/internal/executor"
	"github.com/stackpilot/stackpilot/internal/opchannel"
)

// jobExecutor makes the Job executor and the runner channel its Pods call,
// served on --runner-bind-address on every replica. Without a runner image
// (Local is the default and none could be found) there is none: Job Stacks
// then fail saying so.
//
// The channel's certificate is kept in the data dir (or read from
// --runner-cert-dir): the Pods of the Jobs a restarted controller adopts
// trust only the CA they started with.
func jobExecutor(mgr ctrl.Manager, cfg *rest.Config, f *flags, dataDir, runnerImage string) (stack.JobExecutor, error) {
	if runnerImage == "" {
		return nil, nil
	}
	certDir := f.runnerCertDir
	if certDir == "" {
		certDir = filepath.Join(dataDir, "runner-tls")
		if err := opchannel.KeepSelfSigned(certDir, f.runnerEndpoint); err != nil {
			return nil, fmt.Errorf("runner channel certificate in %s: %w", certDir, err)
		}
	}
	channel := opchannel.NewServer()
	// Per namespace, bounded: the runner Pods' installs of their programs'
	// dependencies (internal/opchannel/depcache.go).
	if err := channel.UseDependencyCache(opchannel.DepCache{Dir: filepath.Join(dataDir, "deps")}); err != nil {
		return nil, err
	}
	l, caPEM, err := opchannel.Listen(f.runnerBindAddr, f.runnerEndpoint, certDir)
	if err != nil {
		return nil, fmt.Errorf("--runner-bind-address: %w", err)
	}
	l.Handler = channel.Handler()
	if err := mgr.Add(l); err != nil {
		return nil, err
	}
	// Not the manager's cached client: a cache of every Pod and Job of the
	// cluster would cost memory in proportion to the cluster, and the
	// executor reads only its own operations' objects, by label.
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		return nil, err
	}
	return &executor.Job{
		Client:      c,
		Channel:     channel,
		Endpoint:    f.runnerEndpoint,
		CAPEM:       caPEM,
		RunnerImage: runnerImage,
		Concurrency: f.maxConcurrentJobs,
		CancelGrace: f.gracefulShutdownTimeout,
		// Pending covers scheduling, the image pull and the init
		// container: a Pod past it fails the operation, which backs off.
		PendingTimeout: f.runnerPendingTimeout,
	}, nil
}

// reconcileWorkers: a reconcile waits for its operation to end, so as many
// run at once as operations may: the Local runners, and the Jobs.
func reconcileWorkers(f *flags) int {
	return f.concurrentOperations + f.maxConcurrentJobs
}
