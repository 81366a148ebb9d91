// Command stackpilot-cluster runs the one-node cluster of dev/internal/cluster
// for the Makefile: `make cluster-up`, `make cluster-down`, `make images`; and
// writes the controller image of a release, the same image the cluster gets,
// as an OCI layout: `make image`.
//
//	stackpilot-cluster up       [--dir DIR] [--api-port 6443] [--registry-port 5000]
//	stackpilot-cluster down     [--dir DIR]
//	stackpilot-cluster smoke    [--dir DIR]   run a one-shot Pod and wait for it
//	stackpilot-cluster images   [--dir DIR] --tag TAG [--tools DIR]
//	stackpilot-cluster install  [--dir DIR] --tag TAG | --image REF
//	stackpilot-cluster image    --version VERSION --out DIR [--tools DIR]
//	stackpilot-cluster registry --addr HOST:PORT --dir DIR   (started by up)
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/stackpilot/stackpilot/dev/internal/cluster"
	"github.com/stackpilot/stackpilot/internal/manifests"
	"github.com/stackpilot/stackpilot/internal/toolchain"
)

const defaultDir = "/var/lib/stackpilot/cluster"

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "up":
		err = up(ctx, args)
	case "down":
		err = down(args)
	case "smoke":
		err = smoke(ctx, args)
	case "images":
		err = images(ctx, args)
	case "install":
		err = install(ctx, args)
	case "image":
		err = image(ctx, args)
	case "registry":
		err = registry(ctx, args)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "stackpilot-cluster:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: stackpilot-cluster up|down|smoke|images|install|image|registry [flags]")
	os.Exit(2)
}

func up(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("up", flag.ExitOnError)
	dir := fs.String("dir", defaultDir, "cluster directory")
	apiPort := fs.Int("api-port", 6443, "kube-apiserver port on 127.0.0.1 (0: any free port)")
	registryPort := fs.Int("registry-port", 5000, "registry port on 127.0.0.1 (0: any free port)")
	_ = fs.Parse(args)
	root, bin, err := toolchain.Paths()
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	c, err := cluster.Up(ctx, cluster.Options{
		Dir: *dir, Root: root, BinDir: bin,
		APIServerPort: *apiPort, RegistryPort: *registryPort,
		Detach:          true,
		RegistryCommand: []string{self, "registry"},
		Log:             os.Stdout,
	})
	if err != nil {
		return err
	}
	fmt.Printf("cluster: up in %.1fs\n  export KUBECONFIG=%s\n  kubectl get nodes,pods -A\n  registry: %s\n  stop it: make cluster-down\n",
		c.UpSeconds, c.Kubeconfig, c.Registry)
	return nil
}

func down(args []string) error {
	fs := flag.NewFlagSet("down", flag.ExitOnError)
	dir := fs.String("dir", defaultDir, "cluster directory")
	_ = fs.Parse(args)
	start := time.Now()
	if err := cluster.Down(*dir, os.Stdout); err != nil {
		return err
	}
	fmt.Printf("cluster: down in %.1fs (%s removed)\n", time.Since(start).Seconds(), *dir)
	return nil
}

func smoke(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("smoke", flag.ExitOnError)
	dir := fs.String("dir", defaultDir, "cluster directory")
	_ = fs.Parse(args)
	c, err := cluster.Load(*dir)
	if err != nil {
		return err
	}
	took, err := c.Smoke(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("cluster: a host-network Pod from %s ran to Completed in %.1fs\n", c.Registry, took.Seconds())
	return nil
}

func images(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("images", flag.ExitOnError)
	dir := fs.String("dir", defaultDir, "cluster directory")
	tag := fs.String("tag", "", "image tag (the commit)")
	tools := fs.String("tools", "", "directory of the static pulumi, pulumi-language-yaml and pulumi-resource-kubernetes (default: bin/)")
	_ = fs.Parse(args)
	if *tag == "" {
		return fmt.Errorf("images: --tag is required")
	}
	c, err := cluster.Load(*dir)
	if err != nil {
		return err
	}
	root, bin, err := toolchain.Paths()
	if err != nil {
		return err
	}
	dirs := []string{bin}
	if *tools != "" {
		dirs = []string{*tools}
	}
	start := time.Now()
	ref, err := cluster.PushControllerImage(ctx, root, dirs, filepath.Join(bin, ".image-cache"), c.Registry, *tag)
	if err != nil {
		return err
	}
	fmt.Printf("images: pushed %s:%s\n  %s (%.1fs)\n", c.Registry+"/"+cluster.ControllerRepository, *tag, ref, time.Since(start).Seconds())
	return nil
}

func image(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("image", flag.ExitOnError)
	version := fs.String("version", "", "the release's version, the image's tag")
	out := fs.String("out", "", "directory of the OCI image layout (emptied first)")
	tools := fs.String("tools", "", "directory of the static pulumi, pulumi-language-yaml and pulumi-resource-kubernetes (default: bin/)")
	_ = fs.Parse(args)
	if *version == "" || *out == "" {
		return fmt.Errorf("image: --version and --out are required")
	}
	root, bin, err := toolchain.Paths()
	if err != nil {
		return err
	}
	dirs := []string{bin}
	if *tools != "" {
		dirs = []string{*tools}
	}
	start := time.Now()
	if err := cluster.WriteControllerLayout(ctx, root, dirs, filepath.Join(bin, ".image-cache"), *out, manifests.ImageRepository, *version); err != nil {
		return err
	}
	fmt.Printf("image: wrote %s:%s (linux/amd64) as an OCI layout to %s (%.1fs)\n  push it: skopeo copy oci:%s:%s docker://%s:%s\n",
		manifests.ImageRepository, *version, *out, time.Since(start).Seconds(), *out, *version, manifests.ImageRepository, *version)
	return nil
}

func install(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("install", flag.ExitOnError)
	dir := fs.String("dir", defaultDir, "cluster directory")
	image := fs.String("image", "", "controller image reference (default: <registry>/stackpilot-controller:<tag>)")
	tag := fs.String("tag", "", "tag of the controller image in the cluster's registry (the commit)")
	_ = fs.Parse(args)
	c, err := cluster.Load(*dir)
	if err != nil {
		return err
	}
	if *image == "" && *tag != "" {
		if *image, err = cluster.Resolve(ctx, c.Registry, cluster.ControllerRepository, *tag); err != nil {
			return err
		}
	}
	root, bin, err := toolchain.Paths()
	if err != nil {
		return err
	}
	start := time.Now()
	inst, err := c.Install(ctx, cluster.InstallOptions{Root: root, Kubectl: filepath.Join(bin, "kubectl"), Image: *image, Log: os.Stdout})
	if err != nil {
		return err
	}
	fmt.Printf("install: %s Ready in %.1fs\n", inst.Deployment, time.Since(start).Seconds())
	return nil
}

func registry(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("registry", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:5000", "listen address")
	dir := fs.String("dir", "", "blob directory")
	_ = fs.Parse(args)
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	return cluster.ServeRegistry(ctx, l, *dir, os.Stderr)
}
