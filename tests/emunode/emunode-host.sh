#!/bin/sh
# emunode-host VERB NAME: ask the host harness to act on this machine through QMP and wait for
# its answer (see tests/emunode/hostctl.py). VERB is device_del or device_add with NAME a device
# of the node ("gpu"), or barrier with NAME any word: wait until the other node of a pair has
# asked for the same barrier; or bar_fill OFFSET LENGTH: the host writes its bytes
# (softroce.host_fill_range) into that range of the BAR backing file; or bar_copy NAME: the
# host keeps a copy of the BAR file as it is now (RunResult.bar_copy(NAME)). Prints the host's reply; exit 0 when it says ok, 1 when it refuses,
# 2 when no reply came within 150 s.
exec 4<>/dev/ttyS2 || exit 2
stty -F /dev/ttyS2 raw -echo 2>/dev/null
echo "@@EMUNODE-HOST $*" >&4
while read -t 150 -r line <&4; do
	case "$line" in
	"@@EMUNODE-HOST-REPLY ok"*) echo "${line#@@EMUNODE-HOST-REPLY }"; exit 0 ;;
	"@@EMUNODE-HOST-REPLY "*) echo "emunode-host: ${line#@@EMUNODE-HOST-REPLY }" >&2; exit 1 ;;
	esac
done
echo "emunode-host: no reply from the host to '$*'" >&2
exit 2
