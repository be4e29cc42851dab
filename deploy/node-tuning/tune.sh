#!/usr/bin/env bash
# tune.sh: host network settings for high-throughput CHF nodes, every one
# reversible. README.md beside this file explains each setting.
#
#   tune.sh apply  [-i IFACE] [-m MTU] [-r] [-q IRQ_CPUS]
#   tune.sh revert
#   tune.sh show   [-i IFACE]
#
#   -i IFACE     the data-plane NIC (MTU, ring buffers, IRQ affinity act on it)
#   -m MTU       set the NIC's MTU (e.g. 9000, only where the whole fabric
#                and every peer carry jumbo frames)
#   -r           raise the NIC's RX/TX rings to the hardware maximum
#   -q IRQ_CPUS  stop irqbalance and pin the NIC's IRQs to these CPUs (a
#                cpulist such as 0-1,48-49: the kubelet's reservedSystemCPUs,
#                so pinned pods' cores take no interrupts)
#
# apply saves every value it changes, once, before the first change
# (re-running apply keeps the original values); revert restores them and
# removes the saved state. Environment (for tests and containers):
# PROC_SYS (/proc/sys), PROC_IRQ (/proc/irq), PROC_INTERRUPTS
# (/proc/interrupts), STATE_DIR (/var/lib/chf-node-tuning), HOST_EXEC (a
# prefix running commands in the host's namespaces, e.g. "nsenter -t 1 -m -u
# -i -n -p --", used for systemctl).
set -euo pipefail

PROC_SYS=${PROC_SYS:-/proc/sys}
PROC_IRQ=${PROC_IRQ:-/proc/irq}
PROC_INTERRUPTS=${PROC_INTERRUPTS:-/proc/interrupts}
STATE_DIR=${STATE_DIR:-/var/lib/chf-node-tuning}
HOST_EXEC=${HOST_EXEC:-}
SAVED=$STATE_DIR/saved

# The sysctls applied, in order. 64 MiB socket buffer ceilings; TCP
# autotuning may grow a socket's buffers up to the same 64 MiB.
SYSCTLS=(
	"net.core.rmem_max=67108864"
	"net.core.wmem_max=67108864"
	"net.ipv4.tcp_rmem=4096 87380 67108864"
	"net.ipv4.tcp_wmem=4096 65536 67108864"
	"net.ipv4.tcp_congestion_control=htcp"
	"net.ipv4.tcp_mtu_probing=1"
)

log() { echo "tune: $*" >&2; }
die() {
	log "$*"
	exit 1
}

usage() {
	sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'
	exit 2
}

sysctl_path() { echo "$PROC_SYS/${1//.//}"; }

# normalize turns the tab-separated /proc form into single spaces.
normalize() { tr -s '\t ' '  ' | sed 's/^ //; s/ $//'; }

sysctl_get() { normalize <"$(sysctl_path "$1")"; }

sysctl_set() { printf '%s\n' "$2" >"$(sysctl_path "$1")"; }

# save KEY VALUE records the original value of KEY once.
save() {
	mkdir -p "$STATE_DIR"
	touch "$SAVED"
	if ! grep -q "^$1=" "$SAVED"; then
		printf '%s=%s\n' "$1" "$2" >>"$SAVED"
	fi
}

apply_sysctls() {
	local kv key val
	for kv in "${SYSCTLS[@]}"; do
		key=${kv%%=*}
		val=${kv#*=}
		if [ ! -e "$(sysctl_path "$key")" ]; then
			log "skip $key: not present on this kernel"
			continue
		fi
		if [ "$key" = net.ipv4.tcp_congestion_control ]; then
			if ! grep -qw htcp "$PROC_SYS/net/ipv4/tcp_available_congestion_control" 2>/dev/null; then
				$HOST_EXEC modprobe tcp_htcp 2>/dev/null || true
			fi
			if ! grep -qw htcp "$PROC_SYS/net/ipv4/tcp_available_congestion_control" 2>/dev/null; then
				log "skip $key: htcp not available (modprobe tcp_htcp)"
				continue
			fi
		fi
		save "sysctl:$key" "$(sysctl_get "$key")"
		sysctl_set "$key" "$val"
		log "$key = $val"
	done
}

apply_mtu() {
	local iface=$1 mtu=$2
	save "mtu:$iface" "$(cat "/sys/class/net/$iface/mtu")"
	ip link set dev "$iface" mtu "$mtu"
	log "$iface mtu = $mtu"
}

apply_rings() {
	local iface=$1 out rx tx maxrx maxtx
	if ! out=$(ethtool -g "$iface" 2>/dev/null); then
		log "skip rings of $iface: ethtool -g not supported"
		return
	fi
	# "Pre-set maximums" come first, then "Current hardware settings".
	maxrx=$(awk '/^RX:/{print $2; exit}' <<<"$out")
	maxtx=$(awk '/^TX:/{print $2; exit}' <<<"$out")
	rx=$(awk '/Current/{c=1} c && /^RX:/{print $2; exit}' <<<"$out")
	tx=$(awk '/Current/{c=1} c && /^TX:/{print $2; exit}' <<<"$out")
	save "rings:$iface" "$rx $tx"
	ethtool -G "$iface" rx "$maxrx" tx "$maxtx"
	log "$iface rings rx $maxrx tx $maxtx (were $rx $tx)"
}

# irqs IFACE lists the IRQ numbers whose /proc/interrupts line names IFACE
# (per-queue vectors such as eth0-TxRx-3 or mlx5_comp3@pci...).
irqs() { awk -v ifc="$1" '$NF ~ ifc {sub(":", "", $1); print $1}' "$PROC_INTERRUPTS"; }

apply_irq() {
	local iface=$1 cpus=$2 irq active
	active=no
	if [ -n "$HOST_EXEC" ] || command -v systemctl >/dev/null; then
		if $HOST_EXEC systemctl is-active --quiet irqbalance 2>/dev/null; then
			active=yes
		fi
	fi
	save "irqbalance" "$active"
	if [ "$active" = yes ]; then
		$HOST_EXEC systemctl stop irqbalance
		log "irqbalance stopped"
	fi
	for irq in $(irqs "$iface"); do
		[ -w "$PROC_IRQ/$irq/smp_affinity_list" ] || continue
		save "irq:$irq" "$(cat "$PROC_IRQ/$irq/smp_affinity_list")"
		echo "$cpus" >"$PROC_IRQ/$irq/smp_affinity_list"
		log "irq $irq ($iface) -> cpus $cpus"
	done
}

revert() {
	[ -f "$SAVED" ] || {
		log "nothing to revert ($SAVED absent)"
		return 0
	}
	local key val
	# Restore in reverse order of saving.
	while IFS='=' read -r key val; do
		case "$key" in
		sysctl:*)
			sysctl_set "${key#sysctl:}" "$val"
			log "${key#sysctl:} = $val"
			;;
		mtu:*)
			ip link set dev "${key#mtu:}" mtu "$val"
			log "${key#mtu:} mtu = $val"
			;;
		rings:*)
			ethtool -G "${key#rings:}" rx "${val% *}" tx "${val#* }"
			log "${key#rings:} rings rx ${val% *} tx ${val#* }"
			;;
		irq:*)
			echo "$val" >"$PROC_IRQ/${key#irq:}/smp_affinity_list"
			log "irq ${key#irq:} -> cpus $val"
			;;
		irqbalance)
			if [ "$val" = yes ]; then
				$HOST_EXEC systemctl start irqbalance
				log "irqbalance started"
			fi
			;;
		*) log "unknown saved key $key" ;;
		esac
	done < <(tac "$SAVED")
	rm -f "$SAVED"
}

show() {
	local kv key
	for kv in "${SYSCTLS[@]}"; do
		key=${kv%%=*}
		if [ -e "$(sysctl_path "$key")" ]; then
			printf '%s = %s (tuned: %s)\n' "$key" "$(sysctl_get "$key")" "${kv#*=}"
		fi
	done
	if [ -n "${iface:-}" ]; then
		printf '%s mtu = %s\n' "$iface" "$(cat "/sys/class/net/$iface/mtu")"
		ethtool -g "$iface" 2>/dev/null || true
	fi
	if [ -f "$SAVED" ]; then
		echo "saved originals ($SAVED):"
		cat "$SAVED"
	else
		echo "no saved state: nothing applied"
	fi
}

[ $# -ge 1 ] || usage
action=$1
shift
iface="" mtu="" rings="" irqcpus=""
while getopts "i:m:rq:h" opt; do
	case "$opt" in
	i) iface=$OPTARG ;;
	m) mtu=$OPTARG ;;
	r) rings=1 ;;
	q) irqcpus=$OPTARG ;;
	*) usage ;;
	esac
done

case "$action" in
apply)
	if { [ -n "$mtu" ] || [ -n "$rings" ] || [ -n "$irqcpus" ]; } && [ -z "$iface" ]; then
		die "-m, -r and -q need -i IFACE"
	fi
	[ -z "$mtu" ] || [[ "$mtu" =~ ^[0-9]+$ ]] || die "bad MTU $mtu"
	[ -z "$irqcpus" ] || [[ "$irqcpus" =~ ^[0-9,-]+$ ]] || die "bad cpulist $irqcpus"
	apply_sysctls
	[ -z "$mtu" ] || apply_mtu "$iface" "$mtu"
	[ -z "$rings" ] || apply_rings "$iface"
	[ -z "$irqcpus" ] || apply_irq "$iface" "$irqcpus"
	log "applied; originals in $SAVED (tune.sh revert restores them)"
	;;
revert) revert ;;
show) show ;;
*) usage ;;
esac
