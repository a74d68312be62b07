//go:build tools

// Package traefik pins the Traefik command the data-plane tests run as the
// Gateway implementation. Its only job is to build traefik; the main gatefold
// module never imports github.com/traefik/traefik.
package traefik

import (
	_ "github.com/traefik/traefik/v3/cmd/traefik"
)
