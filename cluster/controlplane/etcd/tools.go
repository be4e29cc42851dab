//go:build tools

// Package etcd pins the etcd server cluster/build.sh builds.
package etcd

import _ "go.etcd.io/etcd/server/v3"
