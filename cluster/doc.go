// Package cluster holds the control-plane test (`make cluster-test`): it
// runs etcd, kube-apiserver and kube-controller-manager on loopback, built
// from the Go module proxy by build.sh, and checks the charts, Pod
// Security, RBAC and the chassis's Kubernetes discovery against them. The
// package has no code outside its tests.
package cluster
