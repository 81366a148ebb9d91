// Package opchannel is the authenticated channel between the controller and
// a runner Pod of the Job executor: the Pod fetches what it runs through it,
// and sends back what the operation produced.
//
// # Who holds what
//
// The controller registers each operation with a Server (Register) and gets a
// fresh credential: 32 random bytes, given to the Pod only through the
// per-operation Secret the Job mounts read-only. The Server keeps only its
// SHA-256 (CredentialHash), which the Job executor also puts on the Job as an
// annotation so that a restarted controller can Adopt the running Job without
// ever having stored the credential. A credential opens the endpoints of one
// operation ID only; that registration names the Stack (its UID), the
// artifact digest and the files the controller writes, so a Pod can never
// name another operation's tree, log or result, whatever it sends.
//
// # What travels where, and why
//
// Pod → controller requests carry "Authorization: Bearer <credential>" over
// TLS; the Pod trusts only the CA the Job gives it (Listen returns it).
//
//	GET  /v1/operations/{id}/spec      the runner.Spec and the tree's digest
//	GET  /v1/operations/{id}/artifact  the tree as a tar stream
//	GET  /v1/operations/{id}/plan      an up's approved plan file (OpUp with a Plan only)
//	POST /v1/operations/{id}/log?offset=N  engine log bytes from offset N
//	PUT  /v1/operations/{id}/progress  a runner.Progress document
//	PUT  /v1/operations/{id}/plan      a preview's saved plan (OpPreview with a Plan only)
//	PUT  /v1/operations/{id}/plan-inputs  the prior inputs kept beside it (runner.PlanInputs), after the plan
//	PUT  /v1/operations/{id}/result    the runner.Result, once
//	GET  /v1/operations/{id}/deps/{key}  a dependency cache entry of the operation's namespace (depcache.go)
//	PUT  /v1/operations/{id}/deps/{key}  a new one, after the Pod installed the program's dependencies
//
// Why each goes that way:
//
//   - The spec travels over the channel, not in the Pod spec or the Secret,
//     because it holds secret values (Spec.Env, secret config): they exist
//     only in the controller's memory, on the wire under TLS, and in the
//     Pod's memory. Its WorkDir is relative to the tree; the controller's
//     own paths (LogFile, ProgressFile, PulumiHome, PulumiCommand, the plan's
//     path) never leave the controller: the Pod uses its work root.
//   - The tree travels by digest: the Pod unpacks it with artifact.Untar (the
//     same refusals and limits as any archive) into a fresh folder, computes
//     artifact.Digest over it and runs nothing unless it equals the digest the
//     controller registered. A tree changed on the controller's disk, or in
//     transit, fails the operation naming both digests.
//   - The engine log and the live counts come back while the engine runs,
//     so `stackpilot logs --follow` and status.currentOperation work as with
//     the Local executor: the controller writes them to the same files
//     (Operation.LogFile, Operation.ProgressFile) that Local's runner writes.
//     Log chunks carry their offset, so a retried chunk is never written
//     twice, and a controller that lost the end of the file (restarted) says
//     from where to send again. The runner already scrubs the log of
//     Spec.Env values and secret config (enginelog.go); the channel adds a
//     bound of MaxLogBytes.
//   - The result comes back last, retried for as long as the Pod may live:
//     the controller may be restarting. It is accepted once; the same result
//     again is a no-op, a different one is refused (409), so a Pod cannot
//     rewrite an outcome the controller has recorded.
//   - A plan file: a preview's saved plan is sent back before its result;
//     an up with a plan fetches the approved one. Only those two directions
//     are open, so an up cannot replace the plan it was approved with.
//
// Denials are 403 with one short text for every reason but expiry, which is
// told only to the holder of the right credential: a Pod learns nothing
// about whether another operation exists. Nothing here logs a credential or a
// value of Spec.Env.
//
// # Wiring, for the Job executor
//
//	srv := opchannel.NewServer()
//	srv.UseDependencyCache(opchannel.DepCache{Dir: filepath.Join(dataDir, "deps")})
//	l, caPEM, err := opchannel.Listen(addr, endpoint, certDir)
//	l.Handler = srv.Handler()
//	mgr.Add(l)
//	cred, err := srv.Register(op)    // cred → the per-operation Secret (with caPEM),
//	                                 // CredentialHash(cred) → the Job's annotation
//	res := <-srv.Result(op.ID)       // or the Job ended without one
//	srv.Unregister(op.ID)
//
// After a restart, Adopt(op, hash) for each running Job, before its Pod
// gives up delivering (resultPatience). The registry lives in one process:
// the endpoint must reach the replica that registered (adopted) the
// operation, and op.TreeDir must stay in the artifact store (out of GC)
// while the operation is registered. With replicas, that is the leader:
// the stackpilot-runner Service selects the Pod the leader labels
// (cmd/controller/leader_label.go), and the replicas serve one
// certificate, kept in a Secret (KeepInSecret), so that the Pods of the
// Jobs a new leader adopts trust it. The Pod runs
// `stackpilot-controller runner pod --endpoint URL --ca-file FILE
// --credential-file FILE --operation ID --work-root DIR`.
//
// # The Pod's environment
//
// The runner in the Pod runs Pulumi with the Pod's own environment (runner
// uses os.Environ) plus Spec.Env: KUBERNETES_SERVICE_HOST and _PORT come from
// the kubelet, so the Kubernetes provider, given no kubeconfig, uses the
// in-cluster config with the Pod's projected ServiceAccount token. The
// controller's rules for the Local executor's environment (cmd/controller's
// runnerBaseEnv, inputs.Tenancy's KUBECONFIG) do not apply: a Job
// operation's Spec.Env must not carry a KUBECONFIG naming a file of the
// controller. PULUMI_HOME is per Pod (under the work root); HOME and TMPDIR
// are moved under the work root when the image's are not writable (a
// read-only root file system).
package opchannel
