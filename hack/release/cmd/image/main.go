// Command image builds the manager's container image (hack/release/image) and
// writes it as an OCI layout, a tarball to load into a node, and/or pushes
// it to a registry. `make image` runs it; see docs/getting-started.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/stepwise-dev/stepwise/hack/release/image"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		platforms, ociLayout, tarballPath, tag, push, version, revision string
		opts                                                            image.Options
	)
	flag.StringVar(&opts.Dir, "dir", ".", "Repository root.")
	flag.StringVar(&opts.Package, "package", "./cmd/manager", "Main package to build.")
	flag.StringVar(&platforms, "platforms", "", "Comma-separated platforms (linux/amd64,linux/arm64); the build machine's when empty.")
	flag.StringVar(&opts.CACerts, "ca-certs", image.DefaultCACerts, "CA bundle (PEM) to ship in the image: the certificates the manager trusts.")
	flag.StringVar(&ociLayout, "oci-layout", "", "Write an OCI image layout (all platforms) into this directory.")
	flag.StringVar(&tarballPath, "tarball", "", "Write the (single-platform) image as a tarball for docker load / ctr images import.")
	flag.StringVar(&tag, "tag", "ghcr.io/stepwise-dev/stepwise:dev", "Name and tag recorded in the tarball and the OCI layout.")
	flag.StringVar(&push, "push", "", "Push to this reference (REGISTRY/REPO:TAG), as an index when several platforms.")
	flag.StringVar(&version, "version", "", "org.opencontainers.image.version label.")
	flag.StringVar(&revision, "revision", "", "org.opencontainers.image.revision label (the git commit).")
	flag.Parse()

	created := time.Unix(0, 0)
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", s, err)
		}
		created = time.Unix(sec, 0)
	}
	opts.Created = created
	opts.Labels = map[string]string{"org.opencontainers.image.source": "https://github.com/stepwise-dev/stepwise"}
	if version != "" {
		opts.Labels["org.opencontainers.image.version"] = version
	}
	if revision != "" {
		opts.Labels["org.opencontainers.image.revision"] = revision
	}
	for p := range strings.SplitSeq(platforms, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		parsed, err := v1.ParsePlatform(p)
		if err != nil {
			return fmt.Errorf("--platforms %q: %w", p, err)
		}
		opts.Platforms = append(opts.Platforms, *parsed)
	}
	if ociLayout == "" && tarballPath == "" && push == "" {
		return fmt.Errorf("nothing to do: give --oci-layout, --tarball and/or --push")
	}
	if tarballPath != "" && len(opts.Platforms) > 1 {
		return fmt.Errorf("--tarball holds one platform; --platforms names %d", len(opts.Platforms))
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	images, err := image.Build(ctx, opts)
	if err != nil {
		return err
	}
	for _, img := range images {
		d, err := img.Digest()
		if err != nil {
			return err
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			return err
		}
		fmt.Printf("built %s %s\n", cfg.Platform(), d)
	}
	if ociLayout != "" {
		idx, err := image.Index(images)
		if err != nil {
			return err
		}
		d, err := image.WriteOCILayout(ociLayout, idx, tag)
		if err != nil {
			return err
		}
		fmt.Printf("OCI layout %s: index %s\n", ociLayout, d)
	}
	if tarballPath != "" {
		if err := image.WriteTarball(tarballPath, tag, images[0]); err != nil {
			return err
		}
		fmt.Printf("tarball %s: %s\n", tarballPath, tag)
	}
	if push != "" {
		d, err := image.Push(ctx, push, images)
		if err != nil {
			return err
		}
		fmt.Printf("pushed %s@%s\n", push, d)
	}
	return nil
}
