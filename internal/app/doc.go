// Package app starts one gatefold replica: its settings (Options, bound to
// the `gatefold manager` flags) and New, which wires the webhooks, the
// merger, the routing controllers, certificates, metrics, probes and leader
// election into a manager. `gatefold manager`, `gatefold dev` and every test
// that runs gatefold start it here, so a test runs what a cluster runs. It
// parses no command line.
package app
