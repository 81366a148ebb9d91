package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// statusWidth is how much of the Ready message the STATUS column shows;
// -o json has all of it.
const statusWidth = 60

type getOptions struct {
	output   string
	selector string
	watch    bool
}

func (c *cli) newGetCmd() *cobra.Command {
	cmd := groupCmd("get", "List resources: get stacks",
		"Lists Stackpilot's resources, like `flux get`.")
	cmd.AddCommand(c.newGetStacksCmd())
	return cmd
}

func (c *cli) newGetStacksCmd() *cobra.Command {
	opts := getOptions{}
	cmd := &cobra.Command{
		Use:     "stacks [NAME]",
		Aliases: []string{"stack", "stk"},
		Short:   "List Stacks: ready, status, revision, suspended, age",
		Long: `Lists the Stacks of the namespace (-n, else the context's), or of every
namespace with -A, like ` + "`flux get kustomizations`" + `: NAME, READY (the Ready
condition's status), STATUS (its message, shortened to 60 characters),
REVISION (status.lastAppliedRevision, its digest shortened to 12 hex digits),
SUSPENDED and AGE, then SHARD (the sharding.fluxcd.io/key label, "-" for the
main shard) when a Stack listed is in a shard. With -A a NAMESPACE column
comes first.

With NAME only that Stack; -l selects by label. --watch prints the table,
then a row each time a Stack changes, until Ctrl-C.

-o json|yaml prints the same rows whole: the full message and revision,
and the creation time instead of the age.`,
		Example: `  stackpilot get stacks -n infra
  stackpilot get stacks -A
  stackpilot get stacks web -n infra --watch
  stackpilot get stacks -A -o json | jq -r '.[] | select(.ready != "True") | .name'`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageErrorf("%s takes at most one Stack name, got %d", verbPath(cmd), len(args))
			}
			return nil
		},
		ValidArgsFunction: c.completeStacks,
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := outputFormat(opts.output)
			if err != nil {
				return err
			}
			if opts.watch && format != "table" {
				return usageErrorf("--watch prints a table: drop -o %s", format)
			}
			sel := labels.Everything()
			if opts.selector != "" {
				if sel, err = labels.Parse(opts.selector); err != nil {
					return usageErrorf("-l %q: %v", opts.selector, err)
				}
			}
			name := ""
			if len(args) == 1 {
				name = args[0]
				if c.kube.allNamespaces {
					return usageErrorf("-A cannot go with a Stack name: a name is looked up in one namespace (-n)")
				}
			}
			g, err := c.stackGetter()
			if err != nil {
				return err
			}
			ctx, stop := signalContext()
			defer stop()
			return c.getStacks(ctx, g, name, sel, format, opts.watch)
		},
	}
	addOutputFlag(cmd, &opts.output)
	cmd.Flags().StringVarP(&opts.selector, "selector", "l", "", "Only Stacks with these labels (a label selector: app=web,tier!=db).")
	cmd.Flags().BoolVarP(&opts.watch, "watch", "w", false, "After the list, print a row each time a Stack changes, until Ctrl-C.")
	return cmd
}

// stackRow is one row of `get stacks`, in every format.
type stackRow struct {
	Namespace string      `json:"namespace"`
	Name      string      `json:"name"`
	Ready     string      `json:"ready"`
	Status    string      `json:"status"`
	Revision  string      `json:"revision"`
	Suspended bool        `json:"suspended"`
	Created   metav1.Time `json:"created"`
	// Shard is the Stack's sharding.fluxcd.io/key label: the shard whose
	// controller serves it ("" for the main one).
	Shard string `json:"shard,omitempty"`
}

func newStackRow(s *v1alpha1.Stack) stackRow {
	r := stackRow{
		Namespace: s.Namespace, Name: s.Name, Ready: string(metav1.ConditionUnknown),
		Revision: s.Status.LastAppliedRevision, Suspended: s.Spec.Suspend, Created: s.CreationTimestamp,
		Shard: s.Labels[v1alpha1.ShardLabel],
	}
	if ready := apimeta.FindStatusCondition(s.Status.Conditions, v1alpha1.ReadyCondition); ready != nil {
		r.Ready, r.Status = string(ready.Status), ready.Message
	}
	if s.DeletionTimestamp != nil {
		r.Status = "deleting: " + r.Status
	}
	return r
}

func (c *cli) getStacks(ctx context.Context, g *stackGetter, name string, sel labels.Selector, format string, watching bool) error {
	all := c.kube.allNamespaces
	var stacks []v1alpha1.Stack
	if name != "" {
		s, err := g.get(ctx, name)
		if err != nil {
			return err
		}
		stacks = []v1alpha1.Stack{*s}
	} else {
		var err error
		if stacks, err = g.list(ctx, all, sel); err != nil {
			return err
		}
	}
	rows := make([]stackRow, len(stacks))
	for i := range stacks {
		rows[i] = newStackRow(&stacks[i])
	}
	if format != "table" {
		return writeStructured(c.stdout, format, rows)
	}
	if len(rows) == 0 && !watching {
		fmt.Fprintln(c.stderr, g.notFoundHint(all, sel))
		return nil
	}
	shards := inShards(rows)
	t := stackTable{t: newTable(c.stdout, stackHeader(all, shards)...), all: all, shards: shards, now: time.Now, seen: map[string]string{}}
	for i := range stacks {
		t.add(&stacks[i], rows[i])
	}
	if err := t.t.flush(); err != nil {
		return err
	}
	if !watching {
		return nil
	}
	return c.watchStacks(ctx, g, name, sel, t)
}

// inShards says whether the table has a SHARD column: a Stack listed is in
// a shard.
func inShards(rows []stackRow) bool {
	for _, r := range rows {
		if r.Shard != "" {
			return true
		}
	}
	return false
}

func stackHeader(all, shards bool) []string {
	h := []string{"NAME", "READY", "STATUS", "REVISION", "SUSPENDED", "AGE"}
	if shards {
		h = append(h, "SHARD")
	}
	if all {
		h = append([]string{"NAMESPACE"}, h...)
	}
	return h
}

// stackTable prints stackRows, the NAMESPACE column with -A, the SHARD
// column when a Stack listed is in a shard ("-": the main one). seen is the
// resourceVersion of each Stack printed, so that a watch, whose first events
// repeat the current state, prints only changes.
type stackTable struct {
	t      *table
	all    bool
	shards bool
	now    func() time.Time
	seen   map[string]string
}

func (t stackTable) add(s *v1alpha1.Stack, r stackRow) {
	t.seen[s.Namespace+"/"+s.Name] = s.ResourceVersion
	cells := []string{r.Name, r.Ready, shorten(r.Status, statusWidth), shortRevision(r.Revision),
		fmt.Sprint(r.Suspended), age(r.Created.Time, t.now())}
	if t.shards {
		cells = append(cells, r.Shard) // empty: "-", the main shard
	}
	if t.all {
		cells = append([]string{r.Namespace}, cells...)
	}
	t.t.row(cells...)
}

// watchStacks prints a row per change of the Stacks listed (the one named,
// or those the selector picks) until ctx ends; a watch the API server ends
// is started again.
func (c *cli) watchStacks(ctx context.Context, g *stackGetter, name string, sel labels.Selector, t stackTable) error {
	cfg, err := c.kube.RESTConfig()
	if err != nil {
		return err
	}
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: kubeScheme()})
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", cfg.Host, err)
	}
	opts := []client.ListOption{}
	if !c.kube.allNamespaces {
		opts = append(opts, client.InNamespace(g.ns))
	}
	if name != "" {
		opts = append(opts, client.MatchingFields{"metadata.name": name})
	} else if !sel.Empty() {
		opts = append(opts, client.MatchingLabelsSelector{Selector: sel})
	}
	for {
		w, err := wc.Watch(ctx, &v1alpha1.StackList{}, opts...)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("watching Stacks: %w", err)
		}
		if done := t.follow(ctx, w); done {
			return nil
		}
	}
}

// follow prints the watch's changes; true when ctx ended (Ctrl-C), false
// when the watch closed and must be started again.
func (t stackTable) follow(ctx context.Context, w watch.Interface) bool {
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return true
		case ev, ok := <-w.ResultChan():
			if !ok {
				return false
			}
			s, isStack := ev.Object.(*v1alpha1.Stack)
			if !isStack || t.seen[s.Namespace+"/"+s.Name] == s.ResourceVersion {
				continue
			}
			r := newStackRow(s)
			if ev.Type == watch.Deleted {
				r.Status = "deleted"
			}
			t.add(s, r)
		}
	}
}
