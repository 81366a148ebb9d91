package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/dev/internal/cluster"
)

// report prints the Stack's status, the ConfigMaps involved and what kubectl
// shows.
func (d *demo) report(ctx context.Context, s *v1alpha1.Stack) error {
	w := d.out
	fmt.Fprintln(w)
	printStackStatus(w, s)

	var meta corev1.ConfigMap
	if err := d.client.Get(ctx, client.ObjectKey{Namespace: demoNamespace, Name: "cluster-metadata"}, &meta); err == nil {
		fmt.Fprintf(w, "\nConfigMap %s/%s (written by the Pulumi program):\n", meta.Namespace, meta.Name)
		printData(w, meta.Data)
	}
	if name := s.Spec.Outputs.ConfigMapName; name != "" {
		var cm corev1.ConfigMap
		if err := d.client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: name}, &cm); err == nil {
			fmt.Fprintf(w, "\nConfigMap %s/%s (the Stack's outputs, published by the controller; secret outputs only go to Secret %s):\n",
				cm.Namespace, cm.Name, s.Spec.Outputs.SecretName)
			printData(w, cm.Data)
		}
	}

	kubectl := filepath.Join(d.bin, "kubectl")
	fmt.Fprintf(w, "\nKubeconfig: %s\n", d.kubeconfig)
	fmt.Fprintf(w, "$ KUBECONFIG=%s %s %s\n", d.kubeconfig, kubectl, strings.Join(d.lookArgs(), " "))
	out, err := d.kubectl(ctx, d.lookArgs()...)
	w.Write(out)
	if err != nil {
		return fmt.Errorf("kubectl %s: %w", strings.Join(d.lookArgs(), " "), err)
	}
	fmt.Fprintln(w)
	return nil
}

// lookArgs is the kubectl command that shows what runs: the controller's Pod
// and the Stacks in a cluster; only Stacks without nodes, where no Pod runs.
func (d *demo) lookArgs() []string {
	if d.mode == modeCluster {
		return []string{"get", "pods,stacks", "-A"}
	}
	return []string{"get", "stacks", "-A"}
}

func (d *demo) kubectl(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(d.bin, "kubectl"), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+d.kubeconfig)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	return buf.Bytes(), err
}

func printStackStatus(w io.Writer, s *v1alpha1.Stack) {
	fmt.Fprintf(w, "Stack %s/%s (generation %d, observed %d)\n", s.Namespace, s.Name, s.Generation, s.Status.ObservedGeneration)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  Conditions:")
	for _, c := range s.Status.Conditions {
		fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	tw.Flush()
	fmt.Fprintf(w, "  Last applied revision: %s\n", s.Status.LastAppliedRevision)
	fmt.Fprintf(w, "  Inputs digest:         %s\n", s.Status.InputsDigest)
	fmt.Fprintln(w, "  Outputs:")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, k := range sortedKeys(s.Status.Outputs) {
		fmt.Fprintf(tw, "    %s\t%s\n", k, s.Status.Outputs[k])
	}
	tw.Flush()
	fmt.Fprintln(w, "  History (newest first):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, h := range s.Status.History {
		fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\t%s\t%s\t%s\n", h.Type, h.Outcome, shortRevision(h.Revision), changes(h.Changes), duration(h), h.ID, h.Message)
	}
	tw.Flush()
}

func printData(w io.Writer, data map[string]string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, k := range sortedKeys(data) {
		fmt.Fprintf(tw, "  %s:\t%s\n", k, data[k])
	}
	tw.Flush()
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// shortRevision shortens "main@sha1:<40 hex>" to "main@sha1:<12 hex>".
func shortRevision(rev string) string {
	if i := strings.LastIndex(rev, ":"); i >= 0 && len(rev)-i-1 > 12 {
		return rev[:i+13]
	}
	return rev
}

func changes(c *v1alpha1.ChangeSummary) string {
	if c == nil {
		return "no changes"
	}
	return fmt.Sprintf("+%d ~%d +-%d -%d", c.Create, c.Update, c.Replace, c.Delete)
}

func duration(h v1alpha1.OperationRecord) string {
	if h.FinishedAt == nil {
		return "running"
	}
	return h.FinishedAt.Sub(h.StartedAt.Time).Round(100 * time.Millisecond).String()
}

// hints says how to look at and play with the running demo.
func (d *demo) hints() {
	kubectl := filepath.Join(d.bin, "kubectl")
	w := d.out
	where := "Stackpilot runs as a process beside a control plane without nodes."
	if d.mode == modeCluster {
		where = "Stackpilot runs as a Pod of Deployment " + cluster.SystemNamespace + "/" + cluster.DeploymentName + " in a one-node cluster on this machine."
	}
	fmt.Fprintf(w, `%[10]s Look at it from another terminal:
  export KUBECONFIG=%[1]s
  %[2]s %[11]s
  %[2]s describe stack %[3]s -n %[4]s
  %[2]s get configmap cluster-metadata -n %[4]s -o yaml

Change an input; the controller runs pulumi up again and the ConfigMap follows:
  %[2]s patch stack %[3]s -n %[4]s --type merge -p '{"spec":{"config":{"environment":"staging"}}}'

Change the program; the new commit is picked up within the Stack's 1m interval, or at once with the annotation:
  git clone %[5]s && cd %[6]s && ${EDITOR:-vi} %[7]s/Pulumi.yaml && git commit -am "Change the program" && git push
  %[2]s annotate stack %[3]s -n %[4]s --overwrite %[8]s="$(date +%%s)"

Controller log: %[9]s
Press Ctrl-C to stop; everything the demo started is stopped and removed.

`, d.kubeconfig, kubectl, demoStackName, demoNamespace, d.git.URL(demoRepo), demoRepo, demoProgramDir,
		v1alpha1.ReconcileRequestAnnotation, d.ctrl.LogLocation(), where, strings.Join(d.lookArgs(), " "))
}

// watch prints what happens to the Stack until the demo is stopped.
func (d *demo) watch(ctx context.Context, key client.ObjectKey) error {
	last, lastOp := "", ""
	for {
		s := &v1alpha1.Stack{}
		if err := d.client.Get(ctx, key, s); err == nil {
			if line := progressLine(s); line != last {
				d.logf("%s/%s: %s", key.Namespace, key.Name, line)
				last = line
			}
			if len(s.Status.History) > 0 && s.Status.History[0].Outcome != v1alpha1.OutcomeRunning {
				h := s.Status.History[0]
				if op := h.ID + string(h.Outcome); op != lastOp {
					if lastOp != "" {
						summary := h.Message
						if summary == "" {
							summary = changes(h.Changes)
						}
						d.logf("%s/%s: %s %s at %s in %s: %s", key.Namespace, key.Name, h.Type, h.Outcome, shortRevision(h.Revision), duration(h), summary)
					}
					lastOp = op
				}
			}
		}
		select {
		case <-ctx.Done():
			fmt.Fprintln(d.out)
			d.logf("Stopping")
			return nil
		case <-d.ctrl.Exited():
			return fmt.Errorf("the controller exited; its log: %s", d.ctrl.LogLocation())
		case <-time.After(time.Second):
		}
	}
}

// diagnose prints what there is to know after a failure: the Stack as it is
// and the end of the controller's log.
func (d *demo) diagnose() {
	w := d.errOut
	if d.client != nil {
		s := &v1alpha1.Stack{}
		if err := d.client.Get(context.Background(), client.ObjectKey{Namespace: demoNamespace, Name: demoStackName}, s); err == nil {
			fmt.Fprintln(w, "\nThe Stack as it is now:")
			printStackStatus(w, s)
		}
	}
	fmt.Fprintf(w, "\nThe end of the controller's log (%s):\n%s\n", d.ctrl.LogLocation(), d.ctrl.LogTail(60))
}
