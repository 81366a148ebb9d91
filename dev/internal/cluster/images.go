package cluster

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Images are built without Docker: static binaries, one layer each, appended
// onto an empty image with go-containerregistry, then pushed to the cluster's
// loopback registry.
const (
	PauseRepository      = "stackpilot/pause"
	PauseTag             = "1"
	ControllerRepository = "stackpilot-controller"
)

// File is one regular file or directory of an image.
type File struct {
	// Path inside the image (absolute).
	Path string
	// Source is the file on this machine; Data is used when Source is empty.
	Source string
	Data   []byte
	// Mode defaults to 0755 for Source files and 0644 for Data.
	Mode int64
	// Dir makes an empty directory (Mode, e.g. 01777 for /tmp).
	Dir bool
}

// ImageSpec describes an image: layers and the config that runs it.
type ImageSpec struct {
	// Base files go into one small layer; Binaries get a layer each, so an
	// unchanged binary is never uploaded twice.
	Base       []File
	Binaries   []File
	Entrypoint []string
	Cmd        []string
	Env        []string
	User       string
	WorkingDir string
}

// BuildImage assembles the image for linux/amd64. Compressed layers are cached
// in cacheDir under a key of their content, so a rebuild only compresses what
// changed.
func BuildImage(spec ImageSpec, cacheDir string) (v1.Image, error) {
	img, _, err := buildImage(spec, cacheDir)
	return img, err
}

// buildImage is BuildImage that also returns the cache files it used.
func buildImage(spec ImageSpec, cacheDir string) (v1.Image, []string, error) {
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return nil, nil, err
	}
	var (
		adds []mutate.Addendum
		used []string
	)
	groups := [][]File{spec.Base}
	for _, b := range spec.Binaries {
		groups = append(groups, []File{b})
	}
	for _, files := range groups {
		if len(files) == 0 {
			continue
		}
		layer, path, err := cachedLayer(files, cacheDir)
		if err != nil {
			return nil, nil, err
		}
		used = append(used, path)
		adds = append(adds, mutate.Addendum{Layer: layer, MediaType: types.OCILayer})
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.Append(base, adds...)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS = "amd64", "linux"
	cfg.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	cfg.Config.Entrypoint = spec.Entrypoint
	cfg.Config.Cmd = spec.Cmd
	cfg.Config.Env = spec.Env
	cfg.Config.User = spec.User
	cfg.Config.WorkingDir = spec.WorkingDir
	img, err = mutate.ConfigFile(img, cfg)
	return img, used, err
}

// pruneCache removes the cached layers other than keep: a rebuilt controller
// leaves its previous layer behind otherwise, at every build. A layer used in
// the last pruneGrace stays: another build (the user image, another checkout
// sharing bin/) may be about to push it.
func pruneCache(cacheDir string, keep []string) {
	k := map[string]bool{}
	for _, p := range keep {
		k[p] = true
	}
	files, _ := filepath.Glob(filepath.Join(cacheDir, "*.tar.gz"))
	for _, f := range files {
		if st, err := os.Stat(f); err == nil && time.Since(st.ModTime()) < pruneGrace {
			continue
		}
		if !k[f] {
			_ = os.Remove(f)
		}
	}
}

// pruneGrace is how long after its last use a cached layer is safe from pruneCache.
const pruneGrace = 15 * time.Minute

// cachedLayer returns the gzip layer of files, from the cache when its key (the
// files' paths, modes and content) was built before.
func cachedLayer(files []File, cacheDir string) (v1.Layer, string, error) {
	key := sha256.New()
	for _, f := range files {
		fmt.Fprintf(key, "%s %o %v\n", f.Path, f.mode(), f.Dir)
		if err := f.hash(key); err != nil {
			return nil, "", err
		}
	}
	sum := hex.EncodeToString(key.Sum(nil))
	cached := filepath.Join(cacheDir, sum+".tar.gz")
	if _, err := os.Stat(cached); err != nil {
		tmp, err := os.CreateTemp(cacheDir, "layer-*.tmp")
		if err != nil {
			return nil, "", err
		}
		err = writeLayer(tmp, files)
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp.Name(), cached)
		}
		if err != nil {
			os.Remove(tmp.Name())
			return nil, "", err
		}
	}
	// The modification time says when the layer was last used (see pruneCache).
	now := time.Now()
	_ = os.Chtimes(cached, now, now)
	layer, err := tarball.LayerFromFile(cached, tarball.WithMediaType(types.OCILayer))
	return layer, cached, err
}

func (f File) mode() int64 {
	switch {
	case f.Mode != 0:
		return f.Mode
	case f.Dir:
		return 0o755
	case f.Source != "":
		return 0o755
	default:
		return 0o644
	}
}

func (f File) hash(w io.Writer) error {
	switch {
	case f.Dir:
		return nil
	case f.Source != "":
		src, err := os.Open(f.Source)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(w, src)
		return err
	default:
		_, err := w.Write(f.Data)
		return err
	}
}

// writeLayer writes a deterministic tar.gz of files (and their parent
// directories): owner root, time zero.
func writeLayer(w io.Writer, files []File) error {
	gz, err := gzip.NewWriterLevel(w, gzip.BestSpeed)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(gz)
	epoch := time.Unix(0, 0)
	seen := map[string]bool{}
	dir := func(p string, mode int64) error {
		if seen[p] {
			return nil
		}
		seen[p] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: p + "/", Mode: mode, ModTime: epoch, Format: tar.FormatPAX})
	}
	for _, f := range files {
		rel := strings.TrimPrefix(path.Clean(f.Path), "/")
		var parents []string
		for p := path.Dir(rel); p != "." && p != "/"; p = path.Dir(p) {
			parents = append([]string{p}, parents...)
		}
		for _, p := range parents {
			if err := dir(p, 0o755); err != nil {
				return err
			}
		}
		if f.Dir {
			if err := dir(rel, f.mode()); err != nil {
				return err
			}
			continue
		}
		var (
			r    io.Reader
			size int64
		)
		if f.Source != "" {
			src, err := os.Open(f.Source)
			if err != nil {
				return err
			}
			defer src.Close()
			st, err := src.Stat()
			if err != nil {
				return err
			}
			r, size = src, st.Size()
		} else {
			r, size = strings.NewReader(string(f.Data)), int64(len(f.Data))
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: rel, Mode: f.mode(), Size: size, ModTime: epoch, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := io.Copy(tw, r); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

// Push uploads img as registry/repo:tag over plain HTTP and returns the
// reference by digest (registry/repo@sha256:...).
func Push(ctx context.Context, img v1.Image, registry, repo, tag string) (string, error) {
	ref, err := name.NewTag(registry+"/"+repo+":"+tag, name.Insecure)
	if err != nil {
		return "", err
	}
	if err := remote.Write(ref, img, remote.WithContext(ctx), remote.WithJobs(2)); err != nil {
		return "", fmt.Errorf("cluster: push %s: %w", ref, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return "", err
	}
	return registry + "/" + repo + "@" + digest.String(), nil
}

// BuildStatic builds the Go package pkg of the module in dir root as a static
// linux/amd64 binary.
func BuildStatic(ctx context.Context, root, pkg, out string) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("cluster: go build %s: %v\n%s", pkg, err, output)
	}
	return nil
}

// PauseImage is the sandbox image: dev/internal/cluster/pause, built static
// (from the dev module, which holds it; root is the repository).
func PauseImage(ctx context.Context, root, workDir string) (v1.Image, error) {
	bin := filepath.Join(workDir, "pause")
	if err := BuildStatic(ctx, filepath.Join(root, "dev"), "./internal/cluster/pause", bin); err != nil {
		return nil, err
	}
	return BuildImage(ImageSpec{
		Binaries:   []File{{Path: "/pause", Source: bin}},
		Entrypoint: []string{"/pause"},
		User:       "65535:65535",
	}, filepath.Join(workDir, "layers"))
}

// nonroot is the user the controller runs as (the distroless convention).
const (
	etcPasswd = "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	etcGroup  = "root:x:0:\nnonroot:x:65532:\n"
)

// ControllerImageSpec is the Stackpilot controller image: the controller (whose
// `runner` subcommand is the runner), the Pulumi CLI, the YAML language host and
// the Kubernetes provider, all static, on PATH, running as 65532. Each tool is
// taken from the first of toolDirs where it is statically linked (`make tools`
// builds them with CGO_ENABLED=0 into bin/).
func ControllerImageSpec(controller string, toolDirs ...string) (ImageSpec, error) {
	spec, err := PulumiImageSpec(toolDirs...)
	if err != nil {
		return ImageSpec{}, err
	}
	spec.Base = imageBase(etcPasswd)
	spec.Binaries = append([]File{{Path: "/usr/local/bin/stackpilot-controller", Source: controller}}, spec.Binaries...)
	spec.Entrypoint = []string{"/usr/local/bin/stackpilot-controller"}
	spec.Cmd = nil
	return spec, nil
}

// PulumiImageRepository is the user image PushPulumiImage pushes.
const PulumiImageRepository = "stackpilot/pulumi"

// PulumiImageSpec is a "user image" for the Job executor's tests: the static
// Pulumi CLI, YAML language host and Kubernetes provider on PATH, /tmp, the
// nonroot user 65532 with HOME=/tmp, and no Stackpilot binary (the executor
// copies its runner in through an init container). Its tool layers are the
// controller image's, so the two share cached and pushed layers. Each
// tool is taken from the first of toolDirs where it is statically linked.
// Run it with readOnlyRootFilesystem and an emptyDir on /tmp. The user's home
// in /etc/passwd is /tmp too: Pulumi finds ~/.pulumi through the passwd entry,
// not $HOME.
func PulumiImageSpec(toolDirs ...string) (ImageSpec, error) {
	spec := ImageSpec{
		Base: imageBase(userImagePasswd),
		Cmd:  []string{"/usr/local/bin/pulumi"},
		Env: []string{
			"PATH=/usr/local/bin:/usr/bin:/bin",
			"HOME=/tmp",
			"PULUMI_SKIP_UPDATE_CHECK=true",
			"PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true",
			"PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK=true",
		},
		User: "65532:65532",
	}
	for _, tool := range ControllerImageTools {
		src, err := FindStatic(tool, toolDirs...)
		if err != nil {
			return ImageSpec{}, err
		}
		spec.Binaries = append(spec.Binaries, File{Path: "/usr/local/bin/" + tool, Source: src})
	}
	return spec, nil
}

// PushPulumiImage builds the user image (PulumiImageSpec) with its layers
// cached in cacheDir/layers, the controller image's cache, pushes it to
// registry as PulumiImageRepository:tag and returns the reference by digest.
// It prunes nothing: its tool layers are the controller image's, and
// PushControllerImage prunes that cache (but not a layer used lately).
func PushPulumiImage(ctx context.Context, toolDirs []string, cacheDir, registry, tag string) (string, error) {
	spec, err := PulumiImageSpec(toolDirs...)
	if err != nil {
		return "", err
	}
	img, err := BuildImage(spec, filepath.Join(cacheDir, "layers"))
	if err != nil {
		return "", err
	}
	return Push(ctx, img, registry, PulumiImageRepository, tag)
}

// userImagePasswd is etcPasswd with the nonroot user's home on /tmp.
const userImagePasswd = "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/tmp:/sbin/nologin\n"

// imageBase is the base layer of the controller and user images: passwd,
// group, /tmp, the nonroot user's home, the machine's CA bundle.
func imageBase(passwd string) []File {
	base := []File{
		{Path: "/etc/passwd", Data: []byte(passwd)},
		{Path: "/etc/group", Data: []byte(etcGroup)},
		{Path: "/tmp", Dir: true, Mode: 0o1777},
		{Path: "/home/nonroot", Dir: true, Mode: 0o755},
	}
	if _, err := os.Stat("/etc/ssl/certs/ca-certificates.crt"); err == nil {
		base = append(base, File{Path: "/etc/ssl/certs/ca-certificates.crt", Source: "/etc/ssl/certs/ca-certificates.crt", Mode: 0o644})
	}
	return base
}

// ControllerImageTools are the pinned tools the controller image carries.
var ControllerImageTools = []string{"pulumi", "pulumi-language-yaml", "pulumi-resource-kubernetes"}

// FindStatic returns the first dirs/name that is a statically linked binary.
func FindStatic(name string, dirs ...string) (string, error) {
	var errs []string
	for _, d := range dirs {
		p := filepath.Join(d, name)
		err := requireStatic(p)
		if err == nil {
			return p, nil
		}
		errs = append(errs, err.Error())
	}
	return "", fmt.Errorf("cluster: no static %s (`make tools` builds them with CGO_ENABLED=0): %s", name, strings.Join(errs, "; "))
}

// requireStatic refuses a binary that needs a dynamic loader: the image has no libc.
func requireStatic(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("%s missing", p)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, 1<<16))
	if err != nil {
		return err
	}
	if strings.Contains(string(data), "/lib64/ld-linux") {
		return fmt.Errorf("%s is dynamically linked (the image has no libc)", p)
	}
	return nil
}

// PushControllerImage builds the controller image (ControllerImage), pushes
// it to registry as stackpilot-controller:tag and returns the reference by
// digest, which it also records in the registry's directory for Install.
func PushControllerImage(ctx context.Context, root string, toolDirs []string, cacheDir, registry, tag string) (string, error) {
	img, used, err := ControllerImage(ctx, root, toolDirs, cacheDir)
	if err != nil {
		return "", err
	}
	ref, err := Push(ctx, img, registry, ControllerRepository, tag)
	if err == nil {
		pruneCache(filepath.Join(cacheDir, "layers"), used)
	}
	return ref, err
}

// ControllerImage builds the controller (static, from the checkout at root)
// and assembles the controller image with the static Pulumi tools from
// toolDirs. used are the cached layers it took from cacheDir/layers, the ones
// to keep when pruning that cache.
func ControllerImage(ctx context.Context, root string, toolDirs []string, cacheDir string) (img v1.Image, used []string, err error) {
	controller := filepath.Join(cacheDir, "stackpilot-controller")
	if err := BuildStatic(ctx, root, "./cmd/controller", controller); err != nil {
		return nil, nil, err
	}
	spec, err := ControllerImageSpec(controller, toolDirs...)
	if err != nil {
		return nil, nil, err
	}
	return buildImage(spec, filepath.Join(cacheDir, "layers"))
}

// Resolve returns registry/repo@digest for registry/repo:tag, so that an install
// names exactly what was pushed (a tag is the commit, and a dirty tree pushes
// different content under the same one).
func Resolve(ctx context.Context, registry, repo, tag string) (string, error) {
	ref, err := name.NewTag(registry+"/"+repo+":"+tag, name.Insecure)
	if err != nil {
		return "", err
	}
	desc, err := remote.Head(ref, remote.WithContext(ctx))
	if err != nil {
		return "", fmt.Errorf("cluster: %s not in the registry (run `make images`): %w", ref, err)
	}
	return registry + "/" + repo + "@" + desc.Digest.String(), nil
}
