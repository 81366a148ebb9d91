package testenv

import (
	_ "github.com/fluxcd/pkg/apis/meta"
	_ "github.com/fluxcd/pkg/gittestserver"
	_ "github.com/fluxcd/pkg/runtime/conditions"
	_ "github.com/go-git/go-git/v5"
	_ "github.com/google/go-containerregistry/pkg/registry"
	_ "github.com/onsi/gomega"
	_ "github.com/pulumi/pulumi/sdk/v3/go/auto"
	_ "sigs.k8s.io/controller-runtime"
	_ "sigs.k8s.io/controller-runtime/pkg/envtest"
)
