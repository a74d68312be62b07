package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// push sends the image index in the layout dir to img with the user's own
// credentials (a Docker config's, or a credential helper's it names), and
// returns the digest reference it pushed.
func push(ctx context.Context, dir, img string) (name.Digest, error) {
	if !namesRegistry(img) {
		return name.Digest{}, fmt.Errorf("IMG %q names no registry: give one, as in make push IMG=<registry>/<repository>/gatefold:<tag>", img)
	}
	ref, err := name.ParseReference(img)
	if err != nil {
		return name.Digest{}, fmt.Errorf("IMG %q is not an image reference: %w", img, err)
	}
	idx, err := readIndex(dir)
	if err != nil {
		return name.Digest{}, err
	}
	digest, err := idx.Digest()
	if err != nil {
		return name.Digest{}, err
	}
	if err := remote.WriteIndex(ref, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return name.Digest{}, fmt.Errorf("pushing %s to %s: %w", digest, img, err)
	}
	return ref.Context().Digest(digest.String()), nil
}

// namesRegistry reports whether img starts with a registry, as Docker reads
// one: a first path element with a dot or a port, or localhost. Without one,
// an image goes to a default registry, which gatefold never chooses.
func namesRegistry(img string) bool {
	first, _, ok := strings.Cut(img, "/")
	return ok && (strings.ContainsAny(first, ".:") || first == "localhost")
}
