// Wrapper module that builds etcd from the Go module proxy for the
// control-plane test (cluster/build.sh). It is not part of the testbed module.
module github.com/chf-testbed/testbed/cluster/controlplane/etcd

go 1.26.0

require go.etcd.io/etcd/server/v3 v3.6.16

replace (
	go.etcd.io/etcd/api/v3 => go.etcd.io/etcd/api/v3 v3.6.16
	go.etcd.io/etcd/client/pkg/v3 => go.etcd.io/etcd/client/pkg/v3 v3.6.16
	go.etcd.io/etcd/client/v3 => go.etcd.io/etcd/client/v3 v3.6.16
	go.etcd.io/etcd/pkg/v3 => go.etcd.io/etcd/pkg/v3 v3.6.16
)
