// Package dataplane runs Traefik, built by `make traefik`, as the Gateway
// implementation of a control plane, with small echo backends on loopback, so
// that what gatefold folds is served by a real data plane in the data-plane
// tests and in `make dev`. A Service cannot point at a loopback address, so
// each backend is a Traefik file-provider service (<name>@file) that an
// HTTPRoute reaches with a cross-provider backendRef (BackendRef).
//
// It is not on gatefold's data path: it imports internal/devenv and
// internal/process, never starts gatefold, and, linked by `gatefold dev`,
// imports nothing under test/.
package dataplane
