package main

import (
	"bytes"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// get stacks shows a SHARD column when a Stack listed is in a shard: the
// sharding.fluxcd.io/key label, "-" for the main shard; none otherwise.
func TestGetStacksShardColumn(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	stack := func(name, shard string) *v1alpha1.Stack {
		s := &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "infra", CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))}}
		if shard != "" {
			s.Labels = map[string]string{v1alpha1.ShardLabel: shard}
		}
		return s
	}
	for _, tc := range []struct {
		stacks []*v1alpha1.Stack
		want   string
	}{
		{[]*v1alpha1.Stack{stack("a", "shard1"), stack("b", "")},
			"NAME   READY     STATUS   REVISION   SUSPENDED   AGE   SHARD\n" +
				"a      Unknown   -        -          false       60m   shard1\n" +
				"b      Unknown   -        -          false       60m   -\n"},
		{[]*v1alpha1.Stack{stack("b", "")},
			"NAME   READY     STATUS   REVISION   SUSPENDED   AGE\n" +
				"b      Unknown   -        -          false       60m\n"},
	} {
		var out bytes.Buffer
		var rows []stackRow
		for _, s := range tc.stacks {
			rows = append(rows, newStackRow(s))
		}
		shards := inShards(rows)
		tb := stackTable{t: newTable(&out, stackHeader(false, shards)...), shards: shards, now: func() time.Time { return now }, seen: map[string]string{}}
		for i, s := range tc.stacks {
			tb.add(s, rows[i])
		}
		if err := tb.t.flush(); err != nil {
			t.Fatal(err)
		}
		if out.String() != tc.want {
			t.Errorf("got\n%s\nwant\n%s", out.String(), tc.want)
		}
	}
}
