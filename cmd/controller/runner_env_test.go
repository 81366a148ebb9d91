package main

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestRunnerBaseEnv(t *testing.T) {
	g := NewWithT(t)
	env := runnerBaseEnv([]string{
		"PATH=/bin", "HOME=/root", "TMPDIR=/tmp", "KUBECONFIG=/etc/admin.conf", "AWS_SECRET_ACCESS_KEY=x",
		"PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true", "PULUMI_EXPERIMENTAL=1",
		"PULUMI_ACCESS_TOKEN=pul-123", "PULUMI_CONFIG_PASSPHRASE=pw", "PULUMI_BACKEND_URL=s3://x",
		"PULUMI_HOME=/x", "PULUMI_SOME_API_KEY=k", "odd",
	})
	g.Expect(env).To(Equal([]string{
		"PATH=/bin", "HOME=/root", "TMPDIR=/tmp",
		"PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true", "PULUMI_EXPERIMENTAL=1",
	}))
}
