// Command image builds gatefold's OCI image without a Docker engine, writes
// it as an OCI archive and pushes it. `make image` runs `image build`, `make
// image-archive` runs `image archive`, `make push` runs `image push`.
//
// build compiles cmd/gatefold statically for each platform, puts the binary
// alone in one layer (/gatefold, owned by 65532) and writes an OCI image
// index of both images into an OCI image layout, named IMG there. It is
// reproducible: the same source tree, Go toolchain and tags give the same
// index digest, because go build's settings are fixed, every time in it is
// the commit's (or SOURCE_DATE_EPOCH's) and its tar and gzip streams are
// written in one fixed order. archive tars that layout for a local cluster
// (kind load image-archive). push sends that index to a
// registry with the user's own credentials (authn.DefaultKeychain).
//
// It is a tool of the repository, never linked into the gatefold binary.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "image: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("no command given: image build|archive|push [flags]")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	switch args[0] {
	case "build":
		var o buildOptions
		fs.StringVar(&o.Out, "out", "bin/image", "Directory of the OCI image layout to write; replaced as a whole")
		fs.StringVar(&o.Image, "image", "", "The name the layout gives the index, <repository>:<tag> (make image's IMG)")
		fs.StringVar(&o.Version, "version", "", "The version gatefold reports, and the image's version label")
		fs.StringVar(&o.Revision, "revision", os.Getenv("GATEFOLD_REVISION"),
			"The commit built, stamped as main.commit and the revision label; git rev-parse HEAD when empty (default $GATEFOLD_REVISION)")
		fs.StringVar(&o.LDFlags, "ldflags", "", "go build's -ldflags (make build's GATEFOLD_LDFLAGS), to which build adds -X main.version and -X main.commit")
		fs.BoolVar(&o.ForPush, "push", false, "Fail first unless --image names its registry, as make push needs")
		o.Progress = os.Stderr
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		b, err := build(ctx, o)
		if err != nil {
			return err
		}
		fmt.Printf("%s: index %s (%s), version %s, revision %s\n", o.Out, b.Digest, platformList(), o.Version, b.Revision)
		return nil
	case "archive":
		var layoutDir, out string
		fs.StringVar(&layoutDir, "layout", "bin/image", "Directory of the OCI image layout that image build wrote")
		fs.StringVar(&out, "out", "bin/image.tar", "The OCI archive to write; replaced as a whole")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if err := archive(layoutDir, out); err != nil {
			return err
		}
		fmt.Printf("%s: the OCI archive of %s\n", out, layoutDir)
		return nil
	case "push":
		var layoutDir, img string
		fs.StringVar(&layoutDir, "layout", "bin/image", "Directory of the OCI image layout that image build wrote")
		fs.StringVar(&img, "image", "", "Where to push: <registry>/<repository>:<tag>")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		pushed, err := push(ctx, layoutDir, img)
		if err != nil {
			return err
		}
		fmt.Printf("Pushed %s\n", pushed)
		return nil
	default:
		return fmt.Errorf("unknown command %q: image build|archive|push [flags]", args[0])
	}
}
