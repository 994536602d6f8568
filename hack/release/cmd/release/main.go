// Command release builds a Stepwise release into a new directory
// (hack/release says what is in it), or pushes the image index of one
// built before. `make release` and `make release-push` run it; the release
// workflow (.github/workflows/release.yaml) runs those on a tag.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/stepwise-dev/stepwise/hack/release"
	"github.com/stepwise-dev/stepwise/hack/release/image"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		opts release.Options
		push bool
	)
	flag.StringVar(&opts.Root, "dir", ".", "Repository root.")
	flag.StringVar(&opts.Out, "out", "dist", "Directory to write the release into: new or empty.")
	flag.StringVar(&opts.Version, "version", "", "The release (v0.2.0); empty: charts/stepwise's appVersion. It must be what the tree installs.")
	flag.StringVar(&opts.Repository, "repository", release.Repository, "Registry and repository of the image, as install.yaml and the chart name it.")
	flag.StringVar(&opts.CACerts, "ca-certs", image.DefaultCACerts, "CA bundle (PEM) the image ships: the certificates the manager trusts.")
	flag.BoolVar(&push, "push", false, "Instead of building: push the image index of --out (its OCI layout) to the REPO:TAG it names, digest unchanged.")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if push {
		return pushRelease(ctx, filepath.Join(opts.Out, release.ImageLayout))
	}

	var err error
	if opts.Created, err = sourceDate(opts.Root); err != nil {
		return err
	}
	if opts.Revision, err = git(opts.Root, "rev-parse", "HEAD"); err != nil {
		return err
	}
	if dirty, err := git(opts.Root, "status", "--porcelain", "--untracked-files=no"); err != nil {
		return err
	} else if dirty != "" {
		fmt.Fprintf(os.Stderr, "release: warning: the tree has uncommitted changes; this release is not commit %s\n", opts.Revision)
	}
	opts.Logf = func(format string, args ...any) { fmt.Printf(format+"\n", args...) }
	began := time.Now()
	res, err := release.Build(ctx, opts)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(res.Files))
	for name := range res.Files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Printf("%10d  %s\n", len(res.Files[name]), filepath.Join(opts.Out, name))
	}
	fmt.Printf("release %s of %s (SOURCE_DATE_EPOCH=%d): image %s, in %s\n",
		res.Version, opts.Revision, opts.Created.Unix(), res.Image, time.Since(began).Round(time.Second))
	return nil
}

// pushRelease pushes the index of the OCI layout in dir to the tag it is
// named (REPO:VERSION): what install.yaml pins by digest, under the
// release's tag.
func pushRelease(ctx context.Context, dir string) error {
	idx, names, err := image.ReadOCILayout(dir)
	if err != nil {
		return err
	}
	var tag string
	for _, n := range names {
		if !strings.Contains(n, "@") {
			tag = n
		}
	}
	if tag == "" {
		return fmt.Errorf("the OCI layout %s names no tag (%q): build it with make release", dir, names)
	}
	d, err := image.PushIndex(ctx, tag, idx)
	if err != nil {
		return err
	}
	fmt.Printf("pushed %s@%s\n", tag, d)
	return nil
}

// sourceDate is SOURCE_DATE_EPOCH, or the time of the commit checked out.
func sourceDate(root string) (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		var err error
		if s, err = git(root, "log", "-1", "--format=%ct"); err != nil {
			return time.Time{}, err
		}
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", s, err)
	}
	return time.Unix(sec, 0).UTC(), nil
}

func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}
