package testenv

import (
	"flag"
	"runtime"
	"strconv"
)

// MinParallel raises how many parallel tests run at once to n, unless
// -parallel was given. Call it from TestMain, before m.Run. go test's default
// is GOMAXPROCS, right for tests that compute; tests that mostly wait on
// child processes (Pulumi, the controller, intervals) leave a two-core
// machine idle with two at a time.
func MinParallel(n int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit && runtime.GOMAXPROCS(0) < n {
		_ = flag.Set("test.parallel", strconv.Itoa(n))
	}
}
