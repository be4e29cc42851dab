#!/usr/bin/env bash
# build.sh builds the cluster's binaries from the Go module proxy into
# <tools-dir>/kube-<k8s>-etcd-<etcd>/ and prints that directory on stdout
# (progress goes to stderr). A binary already there is reused, so a second
# run exits at once.
#
# Usage: cluster/build.sh [--controlplane] [--node] [--multus] [--flannel] [--all] [tools-dir]
#   --controlplane  etcd, kube-apiserver, kube-controller-manager (the default
#                   when no set is named; what make cluster-test needs)
#   --node          kubelet, kube-scheduler, kube-proxy
#   --multus        the Multus CNI thin plugin, as `multus`
#   --flannel       flannel's daemon, as `flanneld` (less two backends: flannel/README.md)
#   --all           all four sets
#   tools-dir       default: <repo>/.tools
set -euo pipefail

K8S_VERSION=v1.37.2
ETCD_VERSION=v3.6.16
MULTUS_VERSION=v4.2.2 # also pinned in multus/go.mod
FLANNEL_VERSION=v0.28.10 # also pinned in flannel/go.mod

usage() {
	sed -n 's/^# \{0,1\}//; 7,14p' "$0" >&2
	exit 2
}

here=$(cd "$(dirname "$0")" && pwd)
controlplane=0 node=0 multus=0 flannel=0 tools=
while (($#)); do
	case $1 in
	--controlplane) controlplane=1 ;;
	--node) node=1 ;;
	--multus) multus=1 ;;
	--flannel) flannel=1 ;;
	--all) controlplane=1 node=1 multus=1 flannel=1 ;;
	-h | --help) usage ;;
	-*) echo "build.sh: unknown flag $1" >&2; usage ;;
	*)
		[[ -z $tools ]] || { echo "build.sh: more than one tools-dir ($tools, $1)" >&2; usage; }
		tools=$1
		;;
	esac
	shift
done
((controlplane + node + multus + flannel)) || controlplane=1
tools=${tools:-$here/../.tools}
out=$tools/kube-$K8S_VERSION-etcd-$ETCD_VERSION
# The directory was controlplane-<k8s>-etcd-<etcd> when it held the control
# plane only: take those binaries over rather than build them again.
old=$tools/controlplane-$K8S_VERSION-etcd-$ETCD_VERSION
if [[ -d $old && ! -e $out ]]; then
	echo "build.sh: moving $old to $out" >&2
	mv "$old" "$out"
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)

export CGO_ENABLED=0 GOFLAGS=-buildvcs=false
major=${K8S_VERSION#v}; major=${major%%.*}
minor=${K8S_VERSION#v$major.}; minor=${minor%%.*}
ld="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ld="$ld -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
done

# CHF_TOOL_CACHE (set by the Makefile): a machine-wide cache of the built
# binaries, keyed by binary, version and a hash of how it is built (the
# wrapper module's files, the flags), so that a fresh clone copies them
# rather than linking them again. Empty: no cache.
cache=${CHF_TOOL_CACHE:-}

# build <module-dir> <binary> <version> <ldflags> <package>: builds package in
# the wrapper module at module-dir into $out/binary unless it is there (or
# in the cache).
build() {
	local dir=$1 bin=$2 version=$3 flags=$4 pkg=$5 c=
	[[ -x $out/$bin ]] && return
	if [[ -n $cache ]]; then
		local key
		key=$( (cd "$here/$dir" && cat go.mod go.sum ./*.go 2>/dev/null; echo "$flags $pkg") | sha256sum | cut -c1-12)
		c=$cache/$bin-$version-$key
		if [[ -x $c/$bin ]]; then
			cp "$c/$bin" "$out/$bin.tmp" && mv "$out/$bin.tmp" "$out/$bin"
			echo "build.sh: $bin $version from the machine's cache ($c)" >&2
			return
		fi
	fi
	echo "build.sh: building $bin $version (several minutes on a cold cache)" >&2
	(
		cd "$here/$dir"
		[[ -f go.sum ]] || go mod tidy
		"$here/../scripts/progress.sh" "build.sh: $bin" nice -n 10 go build -trimpath -ldflags "$flags" -o "$out/$bin.tmp" "$pkg"
	)
	mv "$out/$bin.tmp" "$out/$bin"
	if [[ -n $c ]]; then
		mkdir -p "$c" && cp "$out/$bin" "$c/$bin.tmp" && mv "$c/$bin.tmp" "$c/$bin"
	fi
}

if ((controlplane)); then
	build controlplane kube-apiserver $K8S_VERSION "$ld" k8s.io/kubernetes/cmd/kube-apiserver
	build controlplane kube-controller-manager $K8S_VERSION "$ld" k8s.io/kubernetes/cmd/kube-controller-manager
	build controlplane/etcd etcd $ETCD_VERSION "-s -w" go.etcd.io/etcd/server/v3
fi
if ((node)); then
	build controlplane kubelet $K8S_VERSION "$ld" k8s.io/kubernetes/cmd/kubelet
	build controlplane kube-scheduler $K8S_VERSION "$ld" k8s.io/kubernetes/cmd/kube-scheduler
	build controlplane kube-proxy $K8S_VERSION "$ld" k8s.io/kubernetes/cmd/kube-proxy
fi
if ((multus)); then
	m=gopkg.in/k8snetworkplumbingwg/multus-cni.v4
	build multus multus $MULTUS_VERSION "-s -w -X $m/pkg/multus.version=$MULTUS_VERSION -X $m/pkg/multus.releaseStatus=,released" $m/cmd/multus
fi
if ((flannel)); then
	# main.go is flannel's own main package; the version is stamped as
	# upstream's Makefile does.
	build flannel flanneld $FLANNEL_VERSION "-s -w -X github.com/flannel-io/flannel/pkg/version.Version=$FLANNEL_VERSION" .
fi
echo "$out"
