package benchenv

import (
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"testing"

	_ "github.com/golang/glog" // what registers -v on the global flag set, through Pulumi's SDK

	. "github.com/onsi/gomega"
)

// A benchmark defines -v; glog, which the runner brings in through
// Pulumi's SDK, has already registered -v on the global flag set when main
// runs, so a benchmark that defined its own there panicked before it
// measured anything (`make bench` stopped at its first benchmark).
// OwnFlags gives it a flag set of its own, and every benchmark's main calls
// it before it defines a flag.
func TestOwnFlagsLetsABenchmarkDefineV(t *testing.T) {
	g := NewWithT(t)
	g.Expect(flag.CommandLine.Lookup("v")).NotTo(BeNil(), "glog registers -v: without it this test shows nothing")
	saved := flag.CommandLine
	defer func() { flag.CommandLine = saved }()
	OwnFlags()
	g.Expect(func() { flag.Bool("v", false, "verbose") }).NotTo(Panic())
	g.Expect(flag.CommandLine.Parse([]string{"-v"})).To(Succeed())
}

func TestEveryBenchmarkOwnsItsFlags(t *testing.T) {
	g := NewWithT(t)
	mains, err := filepath.Glob("../../*/main.go")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(len(mains)).To(BeNumerically(">=", 7), "the benchmarks in dev/bench")
	for _, path := range mains {
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		g.Expect(err).NotTo(HaveOccurred())
		var body []ast.Stmt
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Name.Name == "main" && fn.Recv == nil {
				body = fn.Body.List
			}
		}
		g.Expect(body).NotTo(BeEmpty(), "%s has a main", path)
		src, err := os.ReadFile(path)
		g.Expect(err).NotTo(HaveOccurred())
		first := string(src[body[0].Pos()-1 : body[0].End()-1])
		g.Expect(first).To(Equal("benchenv.OwnFlags()"), "%s: main must call benchenv.OwnFlags() first", path)
	}
}
