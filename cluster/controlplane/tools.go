//go:build tools

// Package controlplane pins the Kubernetes commands cluster/build.sh builds.
package controlplane

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
