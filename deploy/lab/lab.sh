#!/usr/bin/env bash
# lab.sh: emulate the cluster network models on one Linux box with network
# namespaces, so the CHF services (and loadgen) can be run across "nodes"
# and "pods" on one machine. Traffic stays inside the namespaces it creates.
#
#   lab.sh up MODEL [-n NODES] [-p PODS] [-m MTU]
#   lab.sh down
#   lab.sh status
#   lab.sh addr NS                    print the address workloads in NS use
#   lab.sh exec NS [-c CPUS] -- CMD…  run CMD in NS, pinned with taskset -c CPUS
#
# MODEL (what stands in for what):
#   baremetal       nodes on one L2 segment (veth pairs into a bridge in a
#                   "fabric" namespace); workloads run in the node namespaces
#                   (hostNetwork)
#   calico-noencap  + a namespace per pod behind a veth, /32 routes and proxy
#                   ARP on the node side as Calico does; pod subnets routed
#                   between nodes without encapsulation
#   calico-ipip     as calico-noencap, pod traffic between nodes in IP-in-IP
#   calico-vxlan    as calico-noencap, pod traffic between nodes in VXLAN
#   sriov           pods get a macvlan interface on the node's uplink (stands
#                   in for an SR-IOV VF: the pod bypasses the node's stack)
#
# Namespaces are named <LAB_PREFIX>fab, <LAB_PREFIX>n<i> (nodes) and
# <LAB_PREFIX>n<i>p<j> (pods); LAB_PREFIX defaults to chflab-. Addresses:
# fabric 10.77.0.<i>/24, pods 10.78.<i>.<j+1> (sriov: 10.77.0.<100+10i+j>).
# `down` deletes every namespace with the prefix, which removes all their
# interfaces, routes and tunnels. Needs root and iproute2.
set -euo pipefail

P=${LAB_PREFIX:-chflab-}
STATE=${LAB_STATE_DIR:-/run}/${P}lab.model

log() { echo "lab: $*" >&2; }
die() {
	log "$*"
	exit 1
}
usage() {
	sed -n '2,31p' "$0" | sed 's/^# \{0,1\}//'
	exit 2
}
in_ns() {
	local ns=$1
	shift
	ip netns exec "$ns" "$@"
}
namespaces() { ip netns list | awk '{print $1}' | grep "^$P" || true; }

newns() {
	ip netns add "$1"
	in_ns "$1" ip link set lo up
}

# fabric NODES MTU: the shared L2 segment and the nodes on it.
fabric() {
	local n=$1 mtu=$2 i
	newns "${P}fab"
	in_ns "${P}fab" ip link add br0 type bridge
	in_ns "${P}fab" ip link set br0 mtu "$mtu" up
	for ((i = 1; i <= n; i++)); do
		newns "${P}n$i"
		in_ns "${P}fab" ip link add "n$i" mtu "$mtu" type veth peer name eth0 netns "${P}n$i"
		in_ns "${P}fab" ip link set "n$i" master br0 up
		# The node's end at the fabric MTU too (a veth peer does not
		# inherit the MTU given to the other end).
		in_ns "${P}n$i" ip link set eth0 mtu "$mtu"
		in_ns "${P}n$i" ip addr add "10.77.0.$i/24" dev eth0
		in_ns "${P}n$i" ip link set eth0 up
		in_ns "${P}n$i" sysctl -qw net.ipv4.ip_forward=1
		# Proxy ARP answers for Calico's link-local gateway only if the node
		# has a route to it through another interface (a real node's
		# default route plays that part).
		in_ns "${P}n$i" ip route add 169.254.1.1/32 dev eth0
	done
}

# calico_pods NODES PODS MTU: a veth per pod, Calico style (/32 address,
# default route to a link-local gateway answered by proxy ARP on the node
# side, without proxy_delay, which would hold the first packets up to
# 0.8 s), at MTU (the fabric's less the encapsulation's overhead, as
# Calico sets the pod MTU).
calico_pods() {
	local n=$1 pods=$2 mtu=$3 i j ns
	for ((i = 1; i <= n; i++)); do
		for ((j = 1; j <= pods; j++)); do
			ns=${P}n${i}p$j
			newns "$ns"
			in_ns "${P}n$i" ip link add "cali$j" mtu "$mtu" type veth peer name eth0 netns "$ns"
			in_ns "${P}n$i" ip link set "cali$j" up
			in_ns "${P}n$i" sysctl -qw "net.ipv4.conf.cali$j.proxy_arp=1"
			in_ns "${P}n$i" sysctl -qw "net.ipv4.neigh.cali$j.proxy_delay=0"
			in_ns "${P}n$i" ip route add "10.78.$i.$((j + 1))/32" dev "cali$j"
			in_ns "$ns" ip link set eth0 mtu "$mtu"
			in_ns "$ns" ip addr add "10.78.$i.$((j + 1))/32" dev eth0
			in_ns "$ns" ip link set eth0 up
			in_ns "$ns" ip route add 169.254.1.1 dev eth0
			in_ns "$ns" ip route add default via 169.254.1.1 dev eth0
		done
	done
}

# routes NODES ENCAP MTU: how node i reaches node k's pod subnet 10.78.k.0/24,
# directly over the fabric (none, as Calico with BGP) or through an IP-in-IP
# tunnel per peer (ipip).
routes() {
	local n=$1 encap=$2 mtu=$3 i k
	for ((i = 1; i <= n; i++)); do
		for ((k = 1; k <= n; k++)); do
			[ "$k" -ne "$i" ] || continue
			case "$encap" in
			none)
				in_ns "${P}n$i" ip route add "10.78.$k.0/24" via "10.77.0.$k" dev eth0
				;;
			ipip)
				in_ns "${P}n$i" ip link add "ipip$k" type ipip local "10.77.0.$i" remote "10.77.0.$k" ||
					die "this kernel has no IP-in-IP (modprobe ipip); try calico-vxlan"
				in_ns "${P}n$i" ip link set "ipip$k" mtu "$((mtu - 20))" up
				in_ns "${P}n$i" ip route add "10.78.$k.0/24" dev "ipip$k"
				;;
			esac
		done
	done
}

# vxlan_routes NODES MTU: a VXLAN device (VNI 4096, as Calico's
# vxlan.calico) per node at MTU - 50 (the pods are at MTU - 50 too); node k's pod subnet is routed via its VTEP with static
# neighbour and forwarding entries, as Calico programs them. The devices
# all exist before the entries reference their MACs.
vxlan_routes() {
	local n=$1 mtu=$2 i k mac
	for ((i = 1; i <= n; i++)); do
		in_ns "${P}n$i" ip link add vxlan0 mtu "$((mtu - 50))" type vxlan id 4096 dev eth0 local "10.77.0.$i" dstport 4789 nolearning
		in_ns "${P}n$i" ip addr add "10.79.0.$i/24" dev vxlan0
		in_ns "${P}n$i" ip link set vxlan0 up
	done
	for ((i = 1; i <= n; i++)); do
		for ((k = 1; k <= n; k++)); do
			[ "$k" -ne "$i" ] || continue
			mac=$(in_ns "${P}n$k" cat /sys/class/net/vxlan0/address)
			in_ns "${P}n$i" ip neigh add "10.79.0.$k" lladdr "$mac" dev vxlan0 nud permanent
			in_ns "${P}n$i" bridge fdb append "$mac" dev vxlan0 dst "10.77.0.$k"
			in_ns "${P}n$i" ip route add "10.78.$k.0/24" via "10.79.0.$k" dev vxlan0 onlink
		done
	done
}

# macvlan_pods NODES PODS: each pod gets a macvlan child of its node's
# uplink, on the fabric's L2 segment, like a VF of the node's NIC. A
# macvlan parent cannot reach its own children (a PF reaches its VFs
# through the NIC's switch), so the node's address moves to a macvlan
# child of its own (mv0): the node then reaches its pods as on SR-IOV.
macvlan_pods() {
	local n=$1 pods=$2 i j ns
	for ((i = 1; i <= n; i++)); do
		in_ns "${P}n$i" ip addr del "10.77.0.$i/24" dev eth0
		in_ns "${P}n$i" ip link add mv0 link eth0 type macvlan mode bridge
		in_ns "${P}n$i" ip addr add "10.77.0.$i/24" dev mv0
		in_ns "${P}n$i" ip link set mv0 up
		for ((j = 1; j <= pods; j++)); do
			ns=${P}n${i}p$j
			newns "$ns"
			in_ns "${P}n$i" ip link add "vf$j" link eth0 type macvlan mode bridge
			in_ns "${P}n$i" ip link set "vf$j" netns "$ns"
			in_ns "$ns" ip link set "vf$j" name net1
			in_ns "$ns" ip addr add "10.77.0.$((100 + 10 * i + j))/24" dev net1
			in_ns "$ns" ip link set net1 up
		done
	done
}

up() {
	local model=$1
	shift
	local n=2 pods=1 mtu=1500 opt
	OPTIND=1
	while getopts "n:p:m:" opt; do
		case "$opt" in
		n) n=$OPTARG ;;
		p) pods=$OPTARG ;;
		m) mtu=$OPTARG ;;
		*) usage ;;
		esac
	done
	[[ "$n" =~ ^[1-9]$ ]] || die "nodes: 1-9"
	[[ "$pods" =~ ^[1-9]$ ]] || die "pods per node: 1-9"
	[ -z "$(namespaces)" ] || die "a lab with prefix $P exists already: lab.sh down first"
	command -v ip >/dev/null || die "iproute2 (ip) is required"
	mkdir -p "$(dirname "$STATE")"
	echo "$model" >"$STATE"
	# Tear down whatever was created if any step fails (die exits too).
	LAB_OK=0
	trap '[ "$LAB_OK" = 1 ] || { log "setup failed; removing the partial lab"; down; }' EXIT
	case "$model" in
	baremetal) fabric "$n" "$mtu" ;;
	calico-noencap)
		fabric "$n" "$mtu"
		calico_pods "$n" "$pods" "$mtu"
		routes "$n" none "$mtu"
		;;
	calico-ipip)
		fabric "$n" "$mtu"
		calico_pods "$n" "$pods" "$((mtu - 20))"
		routes "$n" ipip "$mtu"
		;;
	calico-vxlan)
		fabric "$n" "$mtu"
		calico_pods "$n" "$pods" "$((mtu - 50))"
		vxlan_routes "$n" "$mtu"
		;;
	sriov)
		fabric "$n" "$mtu"
		macvlan_pods "$n" "$pods"
		;;
	*) die "unknown model $model" ;;
	esac
	LAB_OK=1
	log "$model up: $(namespaces | tr '\n' ' ')"
}

down() {
	local ns
	for ns in $(namespaces); do
		ip netns del "$ns"
	done
	rm -f "$STATE"
}

addr() {
	local ns=$1 dev
	for dev in net1 mv0 eth0; do
		if in_ns "$ns" ip -4 -o addr show dev "$dev" 2>/dev/null | awk '{split($4, a, "/"); print a[1]; f=1} END {exit !f}'; then
			return
		fi
	done
	die "no address in $ns"
}

status() {
	[ -f "$STATE" ] && echo "model: $(cat "$STATE")" || echo "model: none"
	local ns
	for ns in $(namespaces); do
		printf '%-16s %s\n' "$ns" "$(addr "$ns" 2>/dev/null || echo -)"
	done
}

lab_exec() {
	local ns=$1 cpus=""
	shift
	if [ "${1:-}" = -c ]; then
		cpus=$2
		shift 2
	fi
	[ "${1:-}" = -- ] && shift
	[ $# -gt 0 ] || usage
	if [ -n "$cpus" ]; then
		exec ip netns exec "$ns" taskset -c "$cpus" "$@"
	fi
	exec ip netns exec "$ns" "$@"
}

[ $# -ge 1 ] || usage
cmd=$1
shift
case "$cmd" in
up)
	[ $# -ge 1 ] || usage
	up "$@"
	;;
down) down ;;
status) status ;;
addr)
	[ $# -eq 1 ] || usage
	addr "$1"
	;;
exec)
	[ $# -ge 2 ] || usage
	lab_exec "$@"
	;;
*) usage ;;
esac
