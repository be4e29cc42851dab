#!/usr/bin/env bash
# build.sh builds the control plane the cluster test runs (kube-apiserver,
# kube-controller-manager, etcd) from the Go module proxy into
# .tools/controlplane-<version>/. A second run finds the binaries and exits at
# once. Usage: cluster/build.sh [tools-dir]   (default: <repo>/.tools)
set -euo pipefail

K8S_VERSION=v1.37.2
ETCD_VERSION=v3.6.16
here=$(cd "$(dirname "$0")" && pwd)
tools=${1:-$here/../.tools}
out=$tools/controlplane-$K8S_VERSION-etcd-$ETCD_VERSION
mkdir -p "$out"
out=$(cd "$out" && pwd)

export CGO_ENABLED=0 GOFLAGS=-buildvcs=false
major=${K8S_VERSION#v}; major=${major%%.*}
minor=${K8S_VERSION#v$major.}; minor=${minor%%.*}
ld="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ld="$ld -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
done

if [[ ! -x $out/kube-apiserver || ! -x $out/kube-controller-manager ]]; then
	cd "$here/controlplane"
	[[ -f go.sum ]] || go mod tidy
	for cmd in kube-apiserver kube-controller-manager; do
		[[ -x $out/$cmd ]] && continue
		echo "build.sh: building $cmd $K8S_VERSION (several minutes on a cold cache)" >&2
		nice -n 10 go build -trimpath -ldflags "$ld" -o "$out/$cmd.tmp" "k8s.io/kubernetes/cmd/$cmd"
		mv "$out/$cmd.tmp" "$out/$cmd"
	done
fi
if [[ ! -x $out/etcd ]]; then
	cd "$here/controlplane/etcd"
	[[ -f go.sum ]] || go mod tidy
	echo "build.sh: building etcd $ETCD_VERSION" >&2
	nice -n 10 go build -trimpath -ldflags "-s -w" -o "$out/etcd.tmp" go.etcd.io/etcd/server/v3
	mv "$out/etcd.tmp" "$out/etcd"
fi
echo "$out"
