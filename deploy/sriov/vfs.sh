#!/usr/bin/env bash
# vfs.sh: create (or remove) SR-IOV virtual functions on a NIC's physical
# function, for the device plugin to advertise. Run on each SR-IOV node.
#
#   vfs.sh create PF NUM [MTU]   e.g. vfs.sh create ens1f0 16 9000
#   vfs.sh remove PF             (sets sriov_numvfs back to 0)
#   vfs.sh show PF
#
# Not persistent across reboots (use a systemd unit or the SR-IOV network
# operator for that). Removing VFs that pods still use breaks those pods:
# drain the node first.
set -euo pipefail
SYS_NET=${SYS_NET:-/sys/class/net}

usage() {
	sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
	exit 2
}
[ $# -ge 2 ] || usage
action=$1 pf=$2
dev=$SYS_NET/$pf/device
[ -e "$dev/sriov_totalvfs" ] || { echo "vfs: $pf has no SR-IOV capability ($dev/sriov_totalvfs)" >&2; exit 1; }

case "$action" in
create)
	num=${3:?number of VFs}
	total=$(cat "$dev/sriov_totalvfs")
	[ "$num" -le "$total" ] || { echo "vfs: $pf supports at most $total VFs" >&2; exit 1; }
	# The count can only change from 0.
	echo 0 >"$dev/sriov_numvfs"
	echo "$num" >"$dev/sriov_numvfs"
	if [ -n "${4:-}" ]; then
		# Jumbo frames: the PF's MTU bounds its VFs'.
		ip link set dev "$pf" mtu "$4"
	fi
	echo "vfs: $pf now has $(cat "$dev/sriov_numvfs") VFs" >&2
	;;
remove)
	echo 0 >"$dev/sriov_numvfs"
	echo "vfs: $pf VFs removed" >&2
	;;
show)
	echo "$pf: $(cat "$dev/sriov_numvfs") of $(cat "$dev/sriov_totalvfs") VFs"
	ip -d link show dev "$pf" | sed -n '/vf /p'
	;;
*) usage ;;
esac
