// Package devenv starts gatefold's real control plane: kube-apiserver, etcd
// and kube-controller-manager (namespace deletion and garbage collection)
// built by test/controlplane, with the Gateway API standard CRDs from the
// gateway-api module and gatefold's CRDs from config/crd. Integration tests
// and `gatefold dev` share it; for `gatefold dev` it also applies the samples
// and prints what the merger made of them.
//
// It is not on gatefold's data path. It never fakes a server: without the
// binaries it fails and says how to build them. The gatefold binary links it,
// so it imports nothing under test/.
package devenv
