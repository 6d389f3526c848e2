#!/bin/busybox sh
# /init of the emulated GPU node. Brings up the RDMA stack, runs /etc/emunode-cmd/* in order and
# reports every result on the second serial port (ttyS1), which carries nothing but our records:
#   @@EMUNODE BEGIN <kind> <name>
#   <base64 of the payload>
#   @@EMUNODE END <kind> <name> <status>
# and finally "@@EMUNODE DONE". The host never has to pick results out of kernel log noise.
/bin/busybox --install -s /bin
export PATH=/gdrpeer/bin:/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mkdir -p /dev/pts /tmp /out && mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /tmp
stty -F /dev/ttyS1 raw -echo 2>/dev/null
stty -F /dev/ttyS2 raw -echo 2>/dev/null  # emunode-host's channel to the harness
exec 3>/dev/ttyS1

record() { # kind name status file
	echo "@@EMUNODE BEGIN $1 $2" >&3
	base64 "$4" >&3
	echo "@@EMUNODE END $1 $2 $3" >&3
}

. /etc/emunode-env

# The RDMA stack: NIC driver, ib_core, ib_uverbs, (crc32_generic before) rdma_rxe.
: >/tmp/setup.log
status=0
for ko in $(cat /etc/emunode-modules); do
	insmod "$ko" >>/tmp/setup.log 2>&1 || { echo "insmod $ko failed" >>/tmp/setup.log; status=1; }
done
ip link set lo up >>/tmp/setup.log 2>&1
ip link set eth0 up >>/tmp/setup.log 2>&1 || status=1
# One node of a pair (emunode.pair): its private IPv4 address on the link to the other node.
if [ -n "$GDRPEER_ADDR" ]; then
	ip addr add "$GDRPEER_ADDR" dev eth0 >>/tmp/setup.log 2>&1 || status=1
	hostname "node-$GDRPEER_NODE"
fi
if [ "$EMUNODE_RXE" = 1 ]; then
	rdma link add rxe0 type rxe netdev eth0 >>/tmp/setup.log 2>&1 || status=1
	# rxe0 is usable once eth0 has carrier (PORT_ACTIVE) and its GID 0, the link-local IPv6
	# address, exists (after IPv6 DAD on eth0).
	i=0
	while [ $i -lt 150 ]; do
		info=$(ibv_devinfo -d rxe0 -v 2>/dev/null)
		echo "$info" | grep -q 'state:[[:space:]]*PORT_ACTIVE' && echo "$info" | grep -q 'GID\[  0\]:.*fe80' && break
		sleep 0.2; i=$((i + 1))
	done
	[ $i -lt 150 ] || { echo "rxe0 not PORT_ACTIVE with a link-local GID after 30 s" >>/tmp/setup.log
		echo "$info" >>/tmp/setup.log; status=1; }
fi

# Devices of the node, found by vendor:device so tests need not know bus numbers.
for d in /sys/bus/pci/devices/*; do
	case "$(cat $d/vendor):$(cat $d/device)" in
	0x1af4:0x1110) export GDRPEER_GPU_BDF=${d##*/} ;;
	0x1234:0x11e8) export GDRPEER_EDU_BDF=${d##*/} ;;
	0x8086:0x10d3) export GDRPEER_NIC_BDF=${d##*/} ;;
	esac
done
env | grep '^GDRPEER_' | sort >>/tmp/setup.log
record setup modules $status /tmp/setup.log

for f in /etc/emunode-cmd/*; do
	[ -e "$f" ] || continue
	n=${f##*/}
	if [ -n "$EMUNODE_CMD_TIMEOUT" ]; then
		timeout -s KILL "$EMUNODE_CMD_TIMEOUT" sh "$f" >/tmp/cmd.out 2>&1 </dev/null
	else
		sh "$f" >/tmp/cmd.out 2>&1 </dev/null
	fi
	record cmd "$n" $? /tmp/cmd.out
done

for f in /out/*; do
	[ -f "$f" ] && record file "${f##*/}" 0 "$f"
done
cat /proc/sys/kernel/tainted >/tmp/taint
record taint kernel 0 /tmp/taint
dmesg >/tmp/dmesg
record dmesg kernel 0 /tmp/dmesg
echo "@@EMUNODE DONE" >&3
exec 3>&-
sync
poweroff -f
