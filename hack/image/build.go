package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// platforms are the image's, in the index's order.
var platforms = []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}

const (
	// binaryName is the layer's one file, /gatefold, the entrypoint.
	binaryName = "gatefold"
	// nonroot owns the binary and runs it, as distroless's nonroot user does;
	// the manifests in config/manager run the container as this user too.
	nonroot = 65532
	// refName is the OCI annotation of a layout's reference, the tag.
	refName = "org.opencontainers.image.ref.name"
	// containerdImageName is the annotation that containerd's import
	// (ctr images import, kind load image-archive) names an image by.
	containerdImageName = "io.containerd.image.name"
)

// buildOptions say what build makes and where it writes it. Image names
// the index in the layout, <repository>:<tag> as IMG gives it. LDFlags are
// go build's link flags besides the ones build adds itself, which stamp
// main.version with Version and main.commit with Revision (git rev-parse
// HEAD when empty). ForPush checks first that Image names its registry, as
// push needs. Progress, when set, is told of each step.
type buildOptions struct {
	Out      string
	Image    string
	ForPush  bool
	Version  string
	Revision string
	LDFlags  string
	Progress io.Writer
}

// built is what build wrote: the index's digest and the commit it names.
type built struct {
	Digest   v1.Hash
	Revision string
}

// source is the tree an image is built from.
type source struct {
	Module   string
	Dir      string
	Revision string
	Created  time.Time
}

// build writes the image index of every platform into the OCI image layout
// o.Out, replacing what was there.
func build(ctx context.Context, o buildOptions) (built, error) {
	if o.Version == "" {
		return built{}, fmt.Errorf("--version is required (make image sets it)")
	}
	if o.ForPush {
		if err := checkPushable(o.Image); err != nil {
			return built{}, err
		}
	}
	names, err := layoutNames(o.Image)
	if err != nil {
		return built{}, err
	}
	src, err := readSource(ctx, o.Revision)
	if err != nil {
		return built{}, err
	}
	if err := checkGoEnv(ctx, src.Dir); err != nil {
		return built{}, err
	}
	ldflags := strings.TrimSpace(o.LDFlags + " -X main.version=" + o.Version + " -X main.commit=" + src.Revision)
	tmp, err := os.MkdirTemp("", "gatefold-image-")
	if err != nil {
		return built{}, err
	}
	defer os.RemoveAll(tmp)
	lbls := labels(src, o.Version)
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range platforms {
		binary := filepath.Join(tmp, p.OS+"-"+p.Architecture)
		progress(o.Progress, "image: building gatefold for %s\n", p)
		if err := compile(ctx, src.Dir, p, ldflags, binary); err != nil {
			return built{}, err
		}
		img, err := platformImage(binary, p, lbls, src.Created)
		if err != nil {
			return built{}, fmt.Errorf("making the %s image: %w", p, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	idx = mutate.Annotations(idx, lbls).(v1.ImageIndex)
	if err := writeLayout(o.Out, idx, names); err != nil {
		return built{}, err
	}
	digest, err := idx.Digest()
	if err != nil {
		return built{}, err
	}
	return built{Digest: digest, Revision: src.Revision}, nil
}

// readSource reads the module of the working directory and its commit:
// revision when given, else git's HEAD. The image's times are
// SOURCE_DATE_EPOCH's when set, else the commit's.
func readSource(ctx context.Context, revision string) (source, error) {
	out, err := output(ctx, "", nil, "go", "list", "-m", "-json")
	if err != nil {
		return source{}, err
	}
	var mod struct{ Path, Dir string }
	if err := json.Unmarshal([]byte(out), &mod); err != nil {
		return source{}, fmt.Errorf("reading go list -m -json: %w", err)
	}
	src := source{Module: mod.Path, Dir: mod.Dir, Revision: revision}
	if src.Revision == "" {
		if src.Revision, err = output(ctx, src.Dir, nil, "git", "rev-parse", "HEAD"); err != nil {
			return source{}, fmt.Errorf("%w; outside a git checkout give the commit with --revision or GATEFOLD_REVISION", err)
		}
	}
	epoch := os.Getenv("SOURCE_DATE_EPOCH")
	if epoch == "" {
		if epoch, err = output(ctx, src.Dir, nil, "git", "log", "-1", "--format=%ct", src.Revision); err != nil {
			return source{}, fmt.Errorf("%w; outside a git checkout give the image's time with SOURCE_DATE_EPOCH", err)
		}
	}
	secs, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return source{}, fmt.Errorf("SOURCE_DATE_EPOCH %q is not a count of seconds: %w", epoch, err)
	}
	src.Created = time.Unix(secs, 0).UTC()
	return src, nil
}

// labels are the OCI annotations of the index and the labels of each
// image's config.
func labels(src source, version string) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       "gatefold",
		"org.opencontainers.image.description": "Folds ListenerFragments into Kubernetes Gateway listeners",
		"org.opencontainers.image.source":      "https://" + src.Module,
		"org.opencontainers.image.version":     version,
		"org.opencontainers.image.revision":    src.Revision,
	}
}

// buildEnv is go build's environment for p: the process's, with every
// setting that changes the binary fixed. It builds for the baseline of p's
// architecture, so that the binary runs on every node of that platform,
// with no VCS stamp (the commit is an ldflag instead: the stamp would also
// say whether untracked files exist), no experiment and no FIPS module,
// whatever GOFLAGS, GOAMD64, GOARM64, GOEXPERIMENT or GOFIPS140 say.
func buildEnv(p v1.Platform) []string {
	return append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture, "GOAMD64=v1", "GOARM64=v8.0",
		"GOFLAGS=-buildvcs=false", "GOEXPERIMENT=", "GOFIPS140=off")
}

// checkGoEnv fails when the go env file sets GOEXPERIMENT, which an empty
// variable in the environment does not override.
func checkGoEnv(ctx context.Context, dir string) error {
	exp, err := output(ctx, dir, buildEnv(platforms[0]), "go", "env", "GOEXPERIMENT")
	if err != nil {
		return err
	}
	if exp != "" {
		return fmt.Errorf("go env sets GOEXPERIMENT=%s, which changes the image: unset it with go env -u GOEXPERIMENT", exp)
	}
	return nil
}

// compile builds cmd/gatefold statically for p into out.
func compile(ctx context.Context, dir string, p v1.Platform, ldflags, out string) error {
	if _, err := output(ctx, dir, buildEnv(p), "go", "build", "-trimpath", "-ldflags", ldflags, "-o", out, "./cmd/gatefold"); err != nil {
		return fmt.Errorf("building gatefold for %s: %w", p, err)
	}
	return nil
}

// platformImage is the image of p: binary alone in one layer, run as
// nonroot with the manager subcommand.
func platformImage(binary string, p v1.Platform, labels map[string]string, created time.Time) (v1.Image, error) {
	layer, err := binaryLayer(binary, created)
	if err != nil {
		return nil, err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer,
		History: v1.History{Created: v1.Time{Time: created}, CreatedBy: "hack/image: the static gatefold binary as /" + binaryName}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = p.OS, p.Architecture, v1.Time{Time: created}
	user := strconv.Itoa(nonroot)
	cf.Config = v1.Config{
		User:       user + ":" + user,
		Entrypoint: []string{"/" + binaryName},
		Cmd:        []string{"manager"},
		Labels:     labels,
	}
	return mutate.ConfigFile(img, cf)
}

// binaryLayer is a gzipped tar of the one file binary as /gatefold, mode
// 0755, owned by nonroot, with mtime as its time: the same bytes for the
// same binary.
func binaryLayer(binary string, mtime time.Time) (v1.Layer, error) {
	b, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: binaryName, Mode: 0o755, Uid: nonroot, Gid: nonroot,
		Size: int64(len(b)), ModTime: mtime, Format: tar.FormatUSTAR}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, fmt.Errorf("writing the layer's tar header: %w", err)
	}
	if _, err := tw.Write(b); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil },
		tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(gzip.BestCompression), tarball.WithCompressedCaching)
}

// layoutNames are the annotations that name the index in the layout, as
// tools that load an OCI layout or archive read them: its tag, and img, the
// name containerd's import gives it, with the tag always written out.
func layoutNames(img string) (map[string]string, error) {
	tag, err := name.NewTag(img)
	if err != nil {
		return nil, fmt.Errorf("IMG %q is not <repository>:<tag>, the name make image gives the image: %w", img, err)
	}
	if !strings.HasSuffix(img, ":"+tag.TagStr()) {
		img += ":" + tag.TagStr()
	}
	return map[string]string{refName: tag.TagStr(), containerdImageName: img}, nil
}

// writeLayout writes idx, annotated with names, as the one entry of a new
// OCI image layout in dir, which it replaces once the new one is whole.
func writeLayout(dir string, idx v1.ImageIndex, names map[string]string) error {
	tmp, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+".new-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	p, err := layout.Write(tmp, empty.Index)
	if err != nil {
		return fmt.Errorf("writing the image layout %s: %w", tmp, err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(names)); err != nil {
		return fmt.Errorf("writing the image index into %s: %w", tmp, err)
	}
	return replaceDir(dir, tmp)
}

// replaceDir puts the directory src in dir's place by renames: dir, when it
// exists, is renamed aside, src in, and then the old dir is deleted; when
// the second rename fails, the old dir is renamed back.
func replaceDir(dir, src string) error {
	old := src + ".old"
	err := os.Rename(dir, old)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	moved := err == nil
	if err := os.Rename(src, dir); err != nil {
		if moved {
			err = errors.Join(err, os.Rename(old, dir))
		}
		return err
	}
	return os.RemoveAll(old)
}

// readIndex reads the image index that build wrote into the layout dir.
func readIndex(dir string) (v1.ImageIndex, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("reading the image layout %s (make image writes it): %w", dir, err)
	}
	ii, err := p.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("reading %s/index.json: %w", dir, err)
	}
	m, err := ii.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("reading %s/index.json: %w", dir, err)
	}
	if len(m.Manifests) != 1 || !m.Manifests[0].MediaType.IsIndex() {
		return nil, fmt.Errorf("%s/index.json lists %d entries, not the one image index make image writes: run make image", dir, len(m.Manifests))
	}
	return ii.ImageIndex(m.Manifests[0].Digest)
}

// progress writes a step's line to w when it is set.
func progress(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format, args...)
	}
}

func platformList() string {
	s := make([]string, len(platforms))
	for i, p := range platforms {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}

// output runs name with args in dir (the working directory when empty) and
// env (the process's when nil), and returns its trimmed standard output.
func output(ctx context.Context, dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = strings.TrimSpace(string(ee.Stderr))
		}
		return "", fmt.Errorf("running %s %s: %w: %s", name, strings.Join(args, " "), err, stderr)
	}
	return strings.TrimSpace(string(out)), nil
}
