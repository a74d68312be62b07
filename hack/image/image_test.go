package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const testVersion = "v0.0.0-imagetest"

// TestImage builds the image as make image does and reads it back as a
// registry and a node would: the index, each platform's config and layer,
// the binary run from the layer, a second build's digest, a push.
func TestImage(t *testing.T) {
	ctx := t.Context()
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	t.Setenv("DOCKER_CONFIG", t.TempDir()) // no credentials but the test's
	created := time.Unix(1700000000, 0).UTC()
	revision, err := output(ctx, "", nil, "git", "rev-parse", "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	opts := buildOptions{Out: filepath.Join(t.TempDir(), "image"), Image: "localhost/gatefold:test", Version: testVersion, LDFlags: "-s -w"}
	b, err := build(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := readIndex(opts.Out)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := idx.Digest(); err != nil || d != b.Digest {
		t.Fatalf("The layout's index is %s (%v), build said %s", d, err, b.Digest)
	}
	checkLayoutNames(t, opts.Out, map[string]string{
		"org.opencontainers.image.ref.name": "test",
		"io.containerd.image.name":          "localhost/gatefold:test",
	})
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var got []v1.Platform
	for _, desc := range m.Manifests {
		if desc.Platform != nil {
			got = append(got, *desc.Platform)
		}
	}
	want := []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}
	if diff := cmp.Diff(want, got); diff != "" || m.MediaType != types.OCIImageIndex {
		t.Fatalf("The index (%s) has platforms (-want +got):\n%s", m.MediaType, diff)
	}
	labels := map[string]string{
		"org.opencontainers.image.title":       "gatefold",
		"org.opencontainers.image.description": "Folds ListenerFragments into Kubernetes Gateway listeners",
		"org.opencontainers.image.source":      "https://github.com/gatefold/gatefold",
		"org.opencontainers.image.version":     testVersion,
		"org.opencontainers.image.revision":    revision,
	}
	if diff := cmp.Diff(labels, m.Annotations); diff != "" {
		t.Errorf("The index's annotations (-want +got):\n%s", diff)
	}

	for _, desc := range m.Manifests {
		t.Run(desc.Platform.String(), func(t *testing.T) {
			img, err := idx.Image(desc.Digest)
			if err != nil {
				t.Fatal(err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			want := v1.Config{User: "65532:65532", Entrypoint: []string{"/gatefold"}, Cmd: []string{"manager"}, Labels: labels}
			if diff := cmp.Diff(want, cf.Config); diff != "" {
				t.Errorf("The image's config (-want +got):\n%s", diff)
			}
			if cf.OS != desc.Platform.OS || cf.Architecture != desc.Platform.Architecture || !cf.Created.Equal(created) {
				t.Errorf("The config says %s/%s created %s, want %s created %s", cf.OS, cf.Architecture, cf.Created, desc.Platform, created)
			}
			checkStatic(t, onlyFile(t, img, created), *desc.Platform)
		})
	}

	t.Run("run", func(t *testing.T) {
		i := slices.IndexFunc(m.Manifests, func(d v1.Descriptor) bool {
			return d.Platform.OS == runtime.GOOS && d.Platform.Architecture == runtime.GOARCH
		})
		if i < 0 {
			t.Skipf("No platform of the image is the host's, %s/%s: its binary is not run", runtime.GOOS, runtime.GOARCH)
		}
		desc := m.Manifests[i]
		img, err := idx.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		binary := onlyFile(t, img, created)
		path := filepath.Join(t.TempDir(), "gatefold")
		if err := os.WriteFile(path, binary, 0o755); err != nil {
			t.Fatal(err)
		}
		out, err := exec.CommandContext(ctx, path, "version").CombinedOutput()
		prefix := "gatefold " + testVersion + " (commit " + revision + ", "
		if err != nil || !strings.HasPrefix(string(out), prefix) || !strings.Contains(string(out), desc.Platform.String()) {
			t.Errorf("The layer's binary printed %q (%v), want %s... %s", out, err, prefix, desc.Platform)
		}
		t.Logf("The layer's binary printed %s", strings.TrimSpace(string(out)))
	})

	t.Run("reproducible", func(t *testing.T) {
		// Settings of the environment that change go build's output, which
		// build fixes: VCS stamping, the amd64 level, an experiment.
		t.Setenv("GOFLAGS", "-buildvcs=true")
		t.Setenv("GOAMD64", "v3")
		t.Setenv("GOEXPERIMENT", "fieldtrack")
		again := opts
		again.Out = filepath.Join(t.TempDir(), "image")
		b2, err := build(ctx, again)
		if err != nil {
			t.Fatal(err)
		}
		if b2.Digest != b.Digest {
			t.Fatalf("A second build of the same tree, with GOFLAGS=-buildvcs=true GOAMD64=v3 GOEXPERIMENT=fieldtrack, gave index %s, the first %s",
				b2.Digest, b.Digest)
		}
		t.Logf("Two builds gave index %s", b2.Digest)
	})

	t.Run("archive", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "image.tar")
		if err := archive(opts.Out, out); err != nil {
			t.Fatal(err)
		}
		dir := untar(t, out)
		got, err := readIndex(dir)
		if err != nil {
			t.Fatal(err)
		}
		if d, err := got.Digest(); err != nil || d != b.Digest {
			t.Fatalf("The archive's index is %s (%v), build said %s", d, err, b.Digest)
		}
		checkLayoutNames(t, dir, map[string]string{
			"org.opencontainers.image.ref.name": "test",
			"io.containerd.image.name":          "localhost/gatefold:test",
		})
	})

	t.Run("push", func(t *testing.T) {
		srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
		defer srv.Close()
		img := strings.TrimPrefix(srv.URL, "http://") + "/gatefold/gatefold:test"
		pushed, err := push(ctx, opts.Out, img)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := name.ParseReference(img)
		if err != nil {
			t.Fatal(err)
		}
		pulled, err := remote.Index(ref, remote.WithContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		if d, err := pulled.Digest(); err != nil || d != b.Digest || pushed != img+"@"+b.Digest.String() {
			t.Fatalf("Pushed %s and pulled %s (%v), built %s", pushed, d, err, b.Digest)
		}
		for _, desc := range m.Manifests {
			img, err := remote.Image(ref, remote.WithContext(ctx), remote.WithPlatform(*desc.Platform))
			if err != nil {
				t.Fatal(err)
			}
			if d, err := img.Digest(); err != nil || d != desc.Digest {
				t.Errorf("Pulling %s for %s gave %s (%v), want %s", img, desc.Platform, d, err, desc.Digest)
			}
		}
	})
}

// checkStatic checks that binary is an ELF executable for p's machine,
// static: no interpreter and no shared library.
func checkStatic(t *testing.T, binary []byte, p v1.Platform) {
	t.Helper()
	machine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[p.Architecture]
	f, err := elf.NewFile(bytes.NewReader(binary))
	if err != nil {
		t.Fatalf("/gatefold is not an ELF file: %v", err)
	}
	if f.Machine != machine {
		t.Errorf("/gatefold is for %s, want %s (%s)", f.Machine, machine, p)
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			t.Errorf("/gatefold has an interpreter (PT_INTERP), want a static binary")
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
		t.Errorf("/gatefold imports the libraries %q (%v), want none", libs, err)
	}
}

// checkLayoutNames checks the annotations of the one entry of the layout
// dir's index.json.
func checkLayoutNames(t *testing.T, dir string, want map[string]string) {
	t.Helper()
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	ii, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, err := ii.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 {
		t.Fatalf("%s/index.json has %d entries, want 1", dir, len(m.Manifests))
	}
	if diff := cmp.Diff(want, m.Manifests[0].Annotations); diff != "" {
		t.Errorf("%s/index.json's annotations (-want +got):\n%s", dir, diff)
	}
}

// untar extracts the archive file into a new directory, which it returns,
// after checking that its entries are the OCI archive's: paths inside it,
// directories and files only, the layout's oci-layout and index.json.
func untar(t *testing.T, file string) string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir := t.TempDir()
	names := eachEntry(t, f, func(hdr *tar.Header, r io.Reader) {
		var err error
		path := filepath.Join(dir, filepath.FromSlash(hdr.Name))
		switch {
		case !filepath.IsLocal(hdr.Name):
			t.Fatalf("The archive's entry %q is outside it", hdr.Name)
		case hdr.Typeflag == tar.TypeDir:
			err = os.MkdirAll(path, 0o755)
		case hdr.Typeflag == tar.TypeReg:
			var b []byte
			if b, err = io.ReadAll(r); err == nil {
				err = os.WriteFile(path, b, 0o644)
			}
		default:
			t.Fatalf("The archive's entry %q is of type %c, want a directory or a file", hdr.Name, hdr.Typeflag)
		}
		if err != nil {
			t.Fatal(err)
		}
	})
	for _, want := range []string{"oci-layout", "index.json", "blobs/", "blobs/sha256/"} {
		if !slices.Contains(names, want) {
			t.Errorf("The archive has no %s: %q", want, names)
		}
	}
	return dir
}

// eachEntry calls fn with each entry of the tar stream r and its content,
// and returns the entries' names.
func eachEntry(t *testing.T, r io.Reader, fn func(*tar.Header, io.Reader)) []string {
	t.Helper()
	tr := tar.NewReader(r)
	var names []string
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, hdr.Name)
		fn(hdr, tr)
	}
}

// onlyFile returns the binary of img's one layer, after checking that the
// layer holds nothing else and that the binary is /gatefold, 0755, owned by
// 65532 and as old as the image.
func onlyFile(t *testing.T, img v1.Image, created time.Time) []byte {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("The image has %d layers, want 1", len(layers))
	}
	if mt, err := layers[0].MediaType(); err != nil || mt != types.OCILayer {
		t.Errorf("The layer's media type is %q (%v), want %q", mt, err, types.OCILayer)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var binary bytes.Buffer
	files := eachEntry(t, rc, func(hdr *tar.Header, r io.Reader) {
		if hdr.Name != "gatefold" {
			return
		}
		if hdr.Typeflag != tar.TypeReg || hdr.Mode != 0o755 || hdr.Uid != 65532 || hdr.Gid != 65532 || !hdr.ModTime.Equal(created) {
			t.Errorf("/gatefold is type %c, mode %o, owner %d:%d, mtime %s; want a file, 755, 65532:65532, %s",
				hdr.Typeflag, hdr.Mode, hdr.Uid, hdr.Gid, hdr.ModTime, created)
		}
		if _, err := io.Copy(&binary, r); err != nil {
			t.Fatal(err)
		}
	})
	if diff := cmp.Diff([]string{"gatefold"}, files); diff != "" {
		t.Errorf("The layer's files (-want +got):\n%s", diff)
	}
	return binary.Bytes()
}

// TestBuildForPush fails before compiling when IMG names no registry.
func TestBuildForPush(t *testing.T) {
	_, err := build(t.Context(), buildOptions{Out: filepath.Join(t.TempDir(), "image"), Image: "gatefold:latest", Version: testVersion,
		ForPush: true, Progress: &failWriter{t}})
	if err == nil || !strings.Contains(err.Error(), `IMG "gatefold:latest" names no registry`) {
		t.Fatalf("build for a push to gatefold:latest returned %v, want an error that IMG names no registry", err)
	}
}

// failWriter fails its test when written to.
type failWriter struct{ t *testing.T }

func (w *failWriter) Write(p []byte) (int, error) {
	w.t.Errorf("Wrote %q, want nothing", p)
	return len(p), nil
}

// TestPushDenied says to log in when the registry refuses the credentials.
func TestPushDenied(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	t.Setenv("REGISTRY_AUTH_FILE", filepath.Join(t.TempDir(), "auth.json"))
	dir := filepath.Join(t.TempDir(), "image")
	idx, err := random.Index(64, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeLayout(dir, idx, nil); err != nil {
		t.Fatal(err)
	}
	for name, status := range map[string]int{"unauthorized": http.StatusUnauthorized, "forbidden": http.StatusForbidden} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/v2/" {
					return
				}
				http.Error(w, `{"errors":[{"code":"DENIED","message":"no"}]}`, status)
			}))
			defer srv.Close()
			host := strings.TrimPrefix(srv.URL, "http://")
			_, err := push(t.Context(), dir, host+"/gatefold/gatefold:test")
			want := "log in to " + host + " (docker login, podman login, or your registry's credential helper) and retry"
			if err == nil || !strings.HasSuffix(err.Error(), want) {
				t.Fatalf("push returned %v, want an error ending in %q", err, want)
			}
		})
	}
}

func TestNamesRegistry(t *testing.T) {
	tests := map[string]struct {
		img  string
		want bool
	}{
		"name and tag only":           {"gatefold:latest", false},
		"repository without registry": {"team/gatefold:v1", false},
		"registry with a dot":         {"10.0.0.1/team/gatefold:v1", true},
		"registry with a port":        {"127.0.0.1:5000/gatefold:v1", true},
		"localhost":                   {"localhost/gatefold@sha256:0000", true},
		"digest without registry":     {"gatefold@sha256:0000", false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := namesRegistry(tc.img); got != tc.want {
				t.Errorf("namesRegistry(%q) = %v, want %v", tc.img, got, tc.want)
			}
		})
	}
}

// TestWriteLayout replaces a layout as a whole, through directories of its
// own: it keeps what else is beside the layout, whatever its name.
func TestWriteLayout(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "image")
	for _, d := range []string{dir, dir + ".tmp"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "stray"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	idx, err := random.Index(64, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeLayout(dir, idx, map[string]string{"org.opencontainers.image.ref.name": "test"}); err != nil {
		t.Fatal(err)
	}
	if _, err := readIndex(dir); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range []string{parent, dir, dir + ".tmp"} {
		entries, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			rel, _ := filepath.Rel(parent, filepath.Join(d, e.Name()))
			got = append(got, filepath.ToSlash(rel))
		}
	}
	want := []string{"image", "image.tmp", "image/blobs", "image/index.json", "image/oci-layout", "image.tmp/stray"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("The files beside and in the layout (-want +got):\n%s", diff)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("The layout is a directory of mode %v (%v), want 0755", fi.Mode().Perm(), err)
	}
}
