//go:build tools

// Package multus pins the Multus CNI thin plugin (cmd/multus) that
// cluster/build.sh builds.
package multus

import _ "gopkg.in/k8snetworkplumbingwg/multus-cni.v4/cmd/multus"
