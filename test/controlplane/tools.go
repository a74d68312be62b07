//go:build tools

// Package controlplane pins the commands the test control plane is built from.
// Its only job is to build kube-apiserver, kube-controller-manager, kubectl
// and etcd; the main gatefold module never imports k8s.io/kubernetes.
package controlplane

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
