package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// push sends the image index in the layout dir to img with the user's own
// credentials (authn.DefaultKeychain's), and returns img@<digest>.
func push(ctx context.Context, dir, img string) (string, error) {
	if err := checkPushable(img); err != nil {
		return "", err
	}
	ref, err := name.ParseReference(img)
	if err != nil {
		return "", fmt.Errorf("IMG %q is not an image reference: %w", img, err)
	}
	idx, err := readIndex(dir)
	if err != nil {
		return "", err
	}
	digest, err := idx.Digest()
	if err != nil {
		return "", err
	}
	if err := remote.WriteIndex(ref, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		var terr *transport.Error
		if errors.As(err, &terr) && (terr.StatusCode == http.StatusUnauthorized || terr.StatusCode == http.StatusForbidden) {
			return "", fmt.Errorf("pushing %s to %s: %w: log in to %s (docker login, podman login, or your registry's credential helper) and retry",
				digest, img, err, ref.Context().RegistryStr())
		}
		return "", fmt.Errorf("pushing %s to %s: %w", digest, img, err)
	}
	return img + "@" + digest.String(), nil
}

// checkPushable fails unless img names its registry.
func checkPushable(img string) error {
	if !namesRegistry(img) {
		return fmt.Errorf("IMG %q names no registry: give one, as in make push IMG=<registry>/<repository>/gatefold:<tag>", img)
	}
	return nil
}

// namesRegistry reports whether img starts with a registry, as Docker reads
// one: a first path element with a dot or a port, or localhost. Without one,
// an image goes to a default registry, which gatefold never chooses.
func namesRegistry(img string) bool {
	first, _, ok := strings.Cut(img, "/")
	return ok && (strings.ContainsAny(first, ".:") || first == "localhost")
}
