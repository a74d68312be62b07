// Package conformance runs Gateway API's own conformance tests for
// ListenerSet (sigs.k8s.io/gateway-api/conformance v1.7.0, unmodified)
// against gatefold, as installed, on the real control plane.
//
// The control plane has no Deployment or ReplicaSet controller, no kubelet
// and no Gateway implementation, so the test runs small stubs in its own process
// for what the suite needs from them: a GatewayClass whose Gateways an
// implementation accepts and programs (status only, on loopback, serving
// nothing), and Ready Pods for the suite's backend Deployments. gatefold
// folds the class's ListenerSets into its Gateways and writes their status;
// the suite judges that status. The stubs are test code and never ship.
//
// A second test runs the suite again with Traefik (bin/traefik) as the
// implementation, carrying the traffic, in a network namespace and a PID
// namespace the test makes for itself (unshare): Traefik serves the
// Gateways on an address of that namespace at ports 80 and 443, and
// upstream's echo server serves the suite's backend Pods behind
// EndpointSlices the test writes. The tests that fail because of Traefik
// itself (failsInTraefik) run in a child process of the test binary, on the
// same cluster, for one failing test fails the whole suite's test; each
// must fail where Traefik's verdict shows, or pass, and the API server's
// audit log must show that gatefold's own entry was the one the test wants.
//
// It is a Go module of its own so that gatefold's go.mod never requires
// the conformance suite and its dependencies. go.mod replaces the suite's
// gateway-api-conformance-images v0.2.0, which the module proxy does not
// serve, with v0.1.0: the same packages, and the echo server the suite's
// HTTP backends name.
package conformance
