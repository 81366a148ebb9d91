package cluster

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	. "github.com/onsi/gomega"
)

func TestMentions(t *testing.T) {
	g := NewWithT(t)
	g.Expect(mentions("-address /var/lib/c/containerd.sock", "/var/lib/c")).To(BeTrue())
	g.Expect(mentions("--dir=/var/lib/c", "/var/lib/c")).To(BeTrue())
	g.Expect(mentions("/var/lib/c2/containerd.sock", "/var/lib/c")).To(BeFalse())
	g.Expect(mentions("/var/lib/c2 /var/lib/c/x", "/var/lib/c")).To(BeTrue())
}

func TestSplitImage(t *testing.T) {
	g := NewWithT(t)
	n, pin := splitImage("127.0.0.1:5000/stackpilot-controller:abc")
	g.Expect(n).To(Equal("127.0.0.1:5000/stackpilot-controller"))
	g.Expect(pin).To(Equal("newTag: abc"))
	n, pin = splitImage("127.0.0.1:5000/stackpilot-controller@sha256:00")
	g.Expect(n).To(Equal("127.0.0.1:5000/stackpilot-controller"))
	g.Expect(pin).To(Equal("digest: sha256:00"))
	n, pin = splitImage("127.0.0.1:5000/x")
	g.Expect(n).To(Equal("127.0.0.1:5000/x"))
	g.Expect(pin).To(Equal("newTag: latest"))
}

func TestUnescapeMount(t *testing.T) {
	NewWithT(t).Expect(unescapeMount(`/a\040b/c`)).To(Equal("/a b/c"))
}

// TestImageRoundTrip builds an image twice (same digest: layers are
// deterministic and cached), pushes it to the loopback registry and reads it
// back with its config.
func TestImageRoundTrip(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	binary := filepath.Join(dir, "tool")
	g.Expect(os.WriteFile(binary, []byte("#!/bin/true\n"), 0o755)).To(Succeed())
	spec := ImageSpec{
		Base:       []File{{Path: "/etc/passwd", Data: []byte(etcPasswd)}, {Path: "/tmp", Dir: true, Mode: 0o1777}},
		Binaries:   []File{{Path: "/usr/local/bin/tool", Source: binary}},
		Entrypoint: []string{"/usr/local/bin/tool"},
		User:       "65532:65532",
	}
	img1, err := BuildImage(spec, filepath.Join(dir, "cache"))
	g.Expect(err).NotTo(HaveOccurred())
	img2, err := BuildImage(spec, filepath.Join(dir, "cache"))
	g.Expect(err).NotTo(HaveOccurred())
	d1, _ := img1.Digest()
	d2, _ := img2.Digest()
	g.Expect(d1).To(Equal(d2))

	l, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = ServeRegistry(ctx, l, filepath.Join(dir, "registry"), nil) }()
	ref, err := Push(ctx, img1, l.Addr().String(), "test/tool", "v1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ref).To(HaveSuffix("@" + d1.String()))

	tag, err := name.NewTag(l.Addr().String()+"/test/tool:v1", name.Insecure)
	g.Expect(err).NotTo(HaveOccurred())
	got, err := remote.Image(tag, remote.WithContext(ctx))
	g.Expect(err).NotTo(HaveOccurred())
	cfg, err := got.ConfigFile()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.Architecture).To(Equal("amd64"))
	g.Expect(cfg.OS).To(Equal("linux"))
	g.Expect(cfg.Config.Entrypoint).To(Equal([]string{"/usr/local/bin/tool"}))
	layers, err := got.Layers()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(layers).To(HaveLen(2))
}

func TestDenied(t *testing.T) {
	g := NewWithT(t)
	c := &Cluster{Dir: t.TempDir()}
	g.Expect(os.MkdirAll(filepath.Join(c.Dir, "logs"), 0o755)).To(Succeed())
	sa := "system:serviceaccount:stackpilot-system:stackpilot-controller"
	log := `{"kind":"Event","stage":"ResponseComplete","verb":"list","user":{"username":"` + sa + `"},"userAgent":"stackpilot-controller/v0.0.0 (linux/amd64)","objectRef":{"resource":"nodes","apiVersion":"v1"},"requestURI":"/api/v1/nodes","responseStatus":{"code":403}}
{"kind":"Event","stage":"ResponseComplete","verb":"get","user":{"username":"` + sa + `"},"userAgent":"stackpilot-controller/v0.0.0","objectRef":{"resource":"secrets","namespace":"infra","name":"x","apiVersion":"v1"},"responseStatus":{"code":200}}
{"kind":"Event","stage":"ResponseComplete","verb":"update","user":{"username":"` + sa + `"},"userAgent":"stackpilot-controller/v0.0.0","objectRef":{"resource":"stacks","subresource":"status","namespace":"infra","name":"app","apiGroup":"stackpilot.dev"},"responseStatus":{"code":403}}
{"kind":"Event","stage":"ResponseComplete","verb":"list","user":{"username":"` + sa + `"},"userAgent":"stackpilot-controller/v0.0.0 (linux/amd64)","objectRef":{"resource":"nodes","apiVersion":"v1"},"responseStatus":{"code":403}}
{"kind":"Event","stage":"ResponseComplete","verb":"list","user":{"username":"admin"},"objectRef":{"resource":"nodes"},"responseStatus":{"code":403}}
{"kind":"Event","stage":"ResponseComplete","verb":"delete","user":{"username":"admin"},"impersonatedUser":{"username":"` + sa + `"},"objectRef":{"resource":"namespaces","name":"kube-system"},"responseStatus":{"code":403}}
{"kind":"Event","stage":"ResponseComplete","verb":"get","user":{"username":"` + sa + `"},"requestURI":"/version","responseStatus":{"code":403}}
`
	g.Expect(os.WriteFile(c.AuditLogPath(), []byte(log), 0o644)).To(Succeed())
	denied, err := c.Denied(sa)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(denied).To(Equal([]string{
		"delete namespaces kube-system",
		"get /version",
		"list nodes by stackpilot-controller/v0.0.0",
		"update stacks.stackpilot.dev/status infra/app by stackpilot-controller/v0.0.0",
	}))
}
