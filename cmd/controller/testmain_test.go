package main

import (
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/testenv"
)

// controlPlane is one API server for the tests of this package that need
// one, started by the first of them.
var controlPlane = testenv.Lazy{Options: testenv.Options{Scheme: testScheme()}}

func testScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(v1alpha1.AddToScheme(s))
	return s
}

func TestMain(m *testing.M) {
	code := m.Run()
	controlPlane.Stop()
	os.Exit(code)
}
