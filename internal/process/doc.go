// Package process holds what the local servers started for `make dev` and the
// tests share: a free loopback port to listen on, and a stop that waits for
// the server to exit. It starts nothing itself and imports nothing of gatefold.
package process
