package main

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

func (c *cli) newEventsCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "events STACK",
		Short: "List the Kubernetes Events of a Stack, oldest first",
		Long: `Lists the Events the controller recorded for the Stack, oldest first, like
` + "`flux events --for Stack/NAME`" + `: when last seen, type (Normal or Warning),
reason, the object, and the message. Kubernetes keeps Events for an hour by
default (kube-apiserver --event-ttl); ` + "`stackpilot history`" + ` has the last 10
operations whatever their age.

Events of an earlier Stack of the same name (deleted, then created again)
are left out. -o json|yaml prints the same rows with the full times and the
count.`,
		Example: `  stackpilot events web -n infra
  stackpilot events web -o json | jq -r '.[] | select(.type == "Warning") | .message'`,
		Args:              exactArgs(1, "one Stack name"),
		ValidArgsFunction: c.completeStacks,
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := outputFormat(output)
			if err != nil {
				return err
			}
			return c.withStack(args[0], func(ctx context.Context, g *stackGetter, s *v1alpha1.Stack) error {
				rows, err := stackEvents(ctx, g.cl, s)
				if err != nil {
					return err
				}
				return printList(c.stdout, format, rows, func() error {
					if len(rows) == 0 {
						c.infof("No Events for Stack %s/%s (Kubernetes keeps them for an hour by default); see `stackpilot history %s -n %s`.", s.Namespace, s.Name, s.Name, s.Namespace)
						return nil
					}
					now := time.Now()
					t := newTable(c.stdout, "LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE")
					for _, r := range rows {
						t.row(age(r.LastSeen.Time, now), r.Type, r.Reason, r.Object, r.Message)
					}
					return t.flush()
				})
			})
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

// eventRow is one Event of `events`, in every format.
type eventRow struct {
	LastSeen  metav1.Time `json:"lastSeen"`
	FirstSeen metav1.Time `json:"firstSeen"`
	Type      string      `json:"type"`
	Reason    string      `json:"reason"`
	Object    string      `json:"object"`
	Count     int32       `json:"count"`
	Message   string      `json:"message"`
}

// stackEvents lists the Events about s (by kind and name, a field
// selector the API server answers itself; then by UID), oldest first.
func stackEvents(ctx context.Context, cl client.Client, s *v1alpha1.Stack) ([]eventRow, error) {
	var list corev1.EventList
	sel := fields.SelectorFromSet(fields.Set{
		"involvedObject.kind": v1alpha1.StackKind, "involvedObject.name": s.Name, "involvedObject.namespace": s.Namespace,
	})
	if err := cl.List(ctx, &list, client.InNamespace(s.Namespace), client.MatchingFieldsSelector{Selector: sel}); err != nil {
		if apierrors.IsForbidden(err) {
			return nil, fmt.Errorf("not allowed to list Events in namespace %s: ask for list on events there, or see `stackpilot history %s -n %s` (%v)", s.Namespace, s.Name, s.Namespace, err)
		}
		return nil, fmt.Errorf("listing the Events of Stack %s/%s: %w", s.Namespace, s.Name, err)
	}
	var rows []eventRow
	for _, e := range list.Items {
		if e.InvolvedObject.UID != "" && e.InvolvedObject.UID != s.UID {
			continue
		}
		first, last := eventTimes(e)
		rows = append(rows, eventRow{
			LastSeen: last, FirstSeen: first, Type: e.Type, Reason: e.Reason,
			Object: v1alpha1.StackKind + "/" + s.Name, Count: max(e.Count, 1), Message: e.Message,
		})
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].LastSeen.Before(&rows[j].LastSeen) })
	if rows == nil {
		rows = []eventRow{}
	}
	return rows, nil
}

// eventTimes are when an Event was first and last seen: core/v1's
// timestamps, or the events.k8s.io fields a newer recorder sets instead.
func eventTimes(e corev1.Event) (first, last metav1.Time) {
	first, last = e.FirstTimestamp, e.LastTimestamp
	if e.Series != nil && !e.Series.LastObservedTime.IsZero() {
		last = metav1.NewTime(e.Series.LastObservedTime.Time)
	}
	if last.IsZero() && !e.EventTime.IsZero() {
		last = metav1.NewTime(e.EventTime.Time)
	}
	if last.IsZero() {
		last = e.CreationTimestamp
	}
	if first.IsZero() {
		first = last
	}
	return first, last
}
