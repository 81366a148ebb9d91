package main

import "testing"

func TestCommandSkipsFlagsAndNeverTakesValues(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"up", "--yes", "--stack", "dev"}, "up"},
		{[]string{"--non-interactive", "stack", "select", "--stack", "dev"}, "stack select"},
		{[]string{"--non-interactive", "config", "set-all", "--path", "--secret", "token=hunter2"}, "config set-all"},
		{[]string{"stack", "--show-secrets", "output"}, "stack"},
		{[]string{"version"}, "version"},
		{[]string{"--", "up"}, ""},
		{nil, ""},
	} {
		if got := command(tc.args); got != tc.want {
			t.Errorf("command(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
}
