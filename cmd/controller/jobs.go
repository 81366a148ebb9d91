package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
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
// The channel's certificate is read from --runner-cert-dir, or made once
// and kept: in a Pod, in the Secret certSecret, shared by the replicas of
// the shard (a new leader adopts the old one's Jobs, whose Pods trust only
// the CA they started with); outside a Pod, in the data dir.
func jobExecutor(mgr ctrl.Manager, cfg *rest.Config, f *flags, dataDir, runnerImage string, certSecret types.NamespacedName) (stack.JobExecutor, error) {
	if runnerImage == "" {
		return nil, nil
	}
	// Not the manager's cached client: a cache of every Pod and Job of the
	// cluster would cost memory in proportion to the cluster, and the
	// executor reads only its own operations' objects, by label.
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		return nil, err
	}
	certDir := f.runnerCertDir
	if certDir == "" {
		certDir = filepath.Join(dataDir, "runner-tls")
		if err := keepRunnerCert(c, f, certDir, certSecret); err != nil {
			return nil, err
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

// keepRunnerCert makes sure certDir holds the runner channel's
// self-signed certificate: the Secret's in a Pod (POD_NAME), the data dir's
// own outside one.
func keepRunnerCert(c client.Client, f *flags, certDir string, certSecret types.NamespacedName) error {
	if ownPod(f.ownNamespace()) == nil {
		if err := opchannel.KeepSelfSigned(certDir, f.runnerEndpoint); err != nil {
			return fmt.Errorf("runner channel certificate in %s: %w", certDir, err)
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return opchannel.KeepInSecret(ctx, c, certSecret, f.runnerEndpoint, certDir)
}

// runnerCertSecretName is the runner certificate's Secret of the shard
// whose Lease is leaseID: the shards of one namespace have their own
// runner Services, so their own certificates.
func runnerCertSecretName(leaseID string) string {
	const name = "stackpilot-runner-tls"
	switch {
	case leaseID == defaultLeaderElectionID:
		return name
	case strings.HasPrefix(leaseID, defaultLeaderElectionID+"-"):
		return name + strings.TrimPrefix(leaseID, defaultLeaderElectionID)
	}
	sum := sha256.Sum256([]byte(leaseID))
	return name + "-" + hex.EncodeToString(sum[:])[:10]
}

// reconcileWorkers: a reconcile waits for its operation to end, so as many
// run at once as operations may: the Local runners, and the Jobs.
func reconcileWorkers(f *flags) int {
	return f.concurrentOperations + f.maxConcurrentJobs
}
