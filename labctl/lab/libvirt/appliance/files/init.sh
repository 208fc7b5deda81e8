#!/bin/sh
# labctl workload appliance: /init of the initramfs (busybox sh, PID 1).
#
# Everything it does is read from the kernel command line (labctl.* parameters):
#   labctl.mode=verify    load the virtio stack, print one LABCTL-NIC {json} line per virtio-net NIC,
#                         then LABCTL-DONE, then power off.
#   labctl.mode=workload  bind the virtio-net PCI devices to a userspace driver and run dpdk-testpmd as
#                         the guest forwarder; LABCTL-STATS {json} lines while it runs, a final one
#                         ("final": true), then LABCTL-DONE, then power off.
#   labctl.mode=serve     prepare the NICs as for workload, then take commands from the virtio-serial port
#                         labctl.channel names (one command a line; replies are LABCTL- lines on the same
#                         port and, copied, on the console) until POWEROFF:
#                           HELLO              -> the LABCTL-NIC lines again, then LABCTL-READY {json}
#                           FWD ARG,ARG,...    -> start dpdk-testpmd with these application arguments (as
#                                                 labctl.testpmd); LABCTL-INFO {"testpmd": "ready"} once it
#                                                 answers at its prompt, or LABCTL-ERROR
#                           TP COMMAND         -> one command at testpmd's prompt (start, stop,
#                                                 show fwd stats all: a LABCTL-STATS line with "seq")
#                           END                -> quit testpmd; LABCTL-FWD-END {json}
#                           REPROBE            -> after the host swapped the NICs (PCI hot-unplug, then hot-plug with
#                                                 new settings, MACs kept): wait until every NIC of labctl.macs is
#                                                 back with its kernel driver (a PCI rescan after 5 s if not), then as
#                                                 after a boot: the LABCTL-NIC lines (negotiated rings and queues, read
#                                                 before binding), the NICs bound for DPDK again (stack dpdk) or up
#                                                 (stack kernel), LABCTL-READY {json} as HELLO's; or LABCTL-ERROR
#                           POWEROFF           -> LABCTL-DONE and power off
#                         with labctl.stack=kernel the NICs stay with the kernel's virtio_net (no binding, no
#                         hugepages, no FWD) for the tcp workloads (labctl.workload.tcp), and these commands:
#                           NET MAC ADDR/PREFIX -> the address on that NIC (up); LABCTL-NET {json}
#                           NET MAC dhcp       -> an address from the network's DHCP server (udhcpc)
#                           QUEUES MAC N       -> ethtool -L IF combined N; LABCTL-QUEUES {"rc", "message", "nic"}
#                                                 ("nic" as LABCTL-NIC, read back after the change)
#                           RUN ID PORT ARG,.. -> start iperf3 or sockperf with these arguments in the background
#                                                 (PORT > 0: wait until something listens on it); LABCTL-RUNNING
#                                                 {"id"}; when it ends LABCTL-RESULT {"id", "rc", "output"}
#                           STAT MAC           -> LABCTL-STAT {"stat", "interrupts", "ethtool", "snmp"}: the text
#                                                 of /proc/stat cpu lines, virtio lines of /proc/interrupts,
#                                                 ethtool -S IF and the Tcp: lines of /proc/net/snmp
#                           KILL               -> stop every RUN job; LABCTL-KILLED {"n"}
#   labctl.mode=shell     (debugging) a busybox shell on the console.
# Workload parameters (defaults in brackets):
#   labctl.testpmd=ARG,ARG,...   dpdk-testpmd's application arguments, comma-separated: the lab plan's
#                         forwarder (labctl.lab.plan.ForwarderPlan.options().argv()), the same the embedded
#                         lab runs; the EAL side (--lcores: main lcore floating, worker i on vCPU i-1; the
#                         NICs' PCI addresses; hugepages) is this guest's own [-i,--forward-mode=io]
#   labctl.duration=SECONDS [30]                    labctl.period=SECONDS [5] between LABCTL-STATS lines
#   labctl.tx_first=N [0] bursts sent by every port at start (loops traffic on back-to-back ports)
#   labctl.driver=uio_pci_generic|vfio-pci [uio_pci_generic]
#   labctl.hugepages=N [half the guest memory, at most 512] 2 MiB pages
#   labctl.macs=MAC,MAC [all virtio-net NICs]       labctl.topology=paired|chained|loop [paired]
#   labctl.channel=NAME    also write LABCTL lines to the virtio-serial port of that name
#   labctl.timeout=SECONDS [duration + 600] hard limit before power off
#   labctl.ready_timeout=SECONDS [300] for testpmd to bring its ports up
#   labctl.debug=1         copy testpmd's own output to the console
#   labctl.stack=dpdk|kernel [dpdk]  serve mode: bind the NICs for testpmd, or leave them to virtio_net
# Every line meant for the host starts with LABCTL-; nothing else on the console is a contract.

export PATH=/usr/sbin:/usr/bin:/sbin:/bin
# made by the builder: LD_LIBRARY_PATH (with the DPDK plugin directory), LABCTL_STDBUF_PRELOAD
[ -f /etc/labctl/env ] && . /etc/labctl/env

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
exec </dev/console >/dev/console 2>&1
mkdir -p /dev/pts /dev/shm /run /tmp /var/run /dev/hugepages
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /dev/shm
# keep kernel messages from splitting our lines on the console
dmesg -n 1 2>/dev/null

KVER=$(uname -r)
MODDIR=/lib/modules/$KVER
CHANNEL_DEV=

# --- kernel command line --------------------------------------------------------------------------
LABCTL_mode=verify
for word in $(cat /proc/cmdline); do
    case "$word" in
        labctl.*=*)
            key=${word%%=*}
            key=${key#labctl.}
            val=${word#*=}
            case "$key" in *[!a-zA-Z0-9_]*|'') continue ;; esac
            eval "LABCTL_$key=\$val"
            ;;
    esac
done

# --- helpers ----------------------------------------------------------------------------------------
CHANNEL_FD=
emit() {
    # one LABCTL line to the console and, when asked for, to the virtio-serial channel (a virtio-serial
    # port opens once at a time: serve mode keeps it open on fd 4)
    echo "$*"
    if [ -n "$CHANNEL_FD" ]; then
        echo "$*" >&4 2>/dev/null
    elif [ -n "$CHANNEL_DEV" ]; then
        echo "$*" >>"$CHANNEL_DEV" 2>/dev/null
    fi
}

json_esc() {
    # the text of a JSON string literal: backslashes and double quotes escaped (the values here never
    # hold control characters)
    printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g'
}

json_str() {
    # a JSON string literal; sed only when there is something to escape (each fork costs the TCG guest
    # 10-20 ms)
    case "$1" in
        *[\\\"]*) printf '"%s"' "$(json_esc "$1")" ;;
        *) printf '"%s"' "$1" ;;
    esac
}

json_text() {
    # a file's text as one JSON string literal: newlines as \n, tabs as spaces, other control characters
    # (terminal colour escapes, carriage returns) dropped
    tr -d '\000-\010\013-\037' <"$1" 2>/dev/null | awk 'BEGIN { ORS = ""; print "\"" }
        { gsub(/\\/, "\\\\"); gsub(/"/, "\\\""); gsub(/\t/, " "); print $0 "\\n" } END { print "\"" }'
}

mark_cs() {
    # mark_cs VAR: the guest's uptime in hundredths of a second into VAR (/proc/uptime; no fork)
    read -r up _ </proc/uptime
    eval "$1=\$(( ${up%.*} * 100 + 1${up#*.} - 100 ))"
}

wait_file() {
    # wait_file SECONDS FILE...: until one of the FILEs exists (0) or SECONDS of the guest's uptime have passed
    # (1). Looked at every 50 ms: testpmd is at its prompt about a second after its start under TCG and quits
    # in about 0.2 s, and each tenth of a second waited here is a tenth of every trial's set-up or stop
    mark_cs w_now
    w_end=$(( w_now + $1 * 100 ))
    shift
    while :; do
        for w_f in "$@"; do [ -e "$w_f" ] && return 0; done
        mark_cs w_now
        [ "$w_now" -ge "$w_end" ] && return 1
        sleep 0.05
    done
}

is_uint() {
    case "$1" in ''|*[!0-9]*) return 1 ;; *) return 0 ;; esac
}

error() {
    # error STAGE MESSAGE
    emit "LABCTL-ERROR {\"stage\": $(json_str "$1"), \"message\": $(json_str "$2")}"
}

finish() {
    emit "LABCTL-DONE"
    sync
    poweroff -f
    # poweroff needs ACPI; if it returned, try the other ways out
    echo o >/proc/sysrq-trigger 2>/dev/null
    reboot -f
    while :; do sleep 60; done
}

load_modules() {
    # load_modules GROUP [PARAMS...]: insmod every module of /etc/labctl/modules.GROUP in order
    # (the list is in dependency order, made at build time; files are uncompressed .ko)
    list=/etc/labctl/modules.$1
    shift
    [ -f "$list" ] || return 0
    while read -r name path; do
        [ -n "$name" ] || continue
        [ -d "/sys/module/$name" ] && continue
        params=
        for p in "$@"; do
            case "$p" in "$name":*) params="$params ${p#*:}" ;; esac
        done
        # shellcheck disable=SC2086
        if ! insmod "$MODDIR/$path" $params 2>/dev/null; then
            # a parameter this kernel does not have (e.g. vfio's noiommu switch): load without it
            [ -n "$params" ] && insmod "$MODDIR/$path" 2>/dev/null && continue
            echo "labctl-init: insmod $name failed"
        fi
    done <"$list"
}

find_channel() {
    # the virtio-serial port named labctl.channel (its /dev node may lag the module by a moment)
    [ -n "$LABCTL_channel" ] || return 0
    i=0
    while [ $i -lt 20 ]; do
        for n in /sys/class/virtio-ports/*/name; do
            [ -f "$n" ] || continue
            if [ "$(cat "$n")" = "$LABCTL_channel" ]; then
                port=$(basename "$(dirname "$n")")
                if [ -c "/dev/$port" ]; then
                    CHANNEL_DEV=/dev/$port
                    return 0
                fi
            fi
        done
        i=$((i + 1))
        sleep 0.1
    done
    echo "labctl-init: no virtio-serial port named $LABCTL_channel"
}

virtio_nics() {
    # the virtio-net interfaces, in name order, optionally filtered by labctl.macs
    for d in /sys/class/net/*; do
        [ -e "$d/device/driver" ] || continue
        # the NICs a profile can give a guest: virtio-net, and QEMU's e1000/e1000e (guest.nics.*.model)
        case "$(basename "$(readlink "$d/device/driver")")" in virtio_net|e1000|e1000e) ;; *) continue ;; esac
        if [ -n "$LABCTL_macs" ]; then
            mac=$(cat "$d/address")
            case ",$LABCTL_macs," in *",$mac,"*) ;; *) continue ;; esac
        fi
        basename "$d"
    done
}

wait_nics() {
    # virtio_net probes synchronously, but give the interfaces a moment to settle (a REPROBE has seen
    # every NIC it waits for already: nics_settled)
    [ -n "$nics_settled" ] && return 0
    last=-1
    i=0
    while [ $i -lt 20 ]; do
        n=$(virtio_nics | wc -l)
        [ "$n" -gt 0 ] && [ "$n" -eq "$last" ] && return 0
        last=$n
        i=$((i + 1))
        sleep 0.2
    done
}

ethtool_fields() {
    # ethtool_fields IFNAME FIELD...: "MAX CURRENT" of each FIELD of ethtool -l then ethtool -g, in one
    # line (-g comes second, so its RX and TX rings win over -l's RX and TX channel counts); one awk for
    # every field: each fork costs the TCG guest 10-20 ms
    ifname=$1
    shift
    { ethtool -l "$ifname"; ethtool -g "$ifname"; } 2>/dev/null | awk -v fields="$*" '
        /^Pre-set maximums/ { s = "max" }
        /^Current hardware settings/ { s = "cur" }
        {
            line = $0
            sub(/:.*/, "", line)
            v = $0; sub(/^[^:]*:[ \t]*/, "", v); val[s "/" line] = v
        }
        END {
            n = split(fields, f, " ")
            for (i = 1; i <= n; i++) {
                mx = "max/" f[i]; cu = "cur/" f[i]
                printf "%s %s%s", ((mx in val) ? val[mx] : "n/a"), ((cu in val) ? val[cu] : "n/a"), ((i < n) ? " " : "\n")
            }
        }'
}

nic_pci() {
    # nic_pci IFNAME -> its PCI address: a virtio-net interface's device is the virtio bus device under
    # the PCI function; an e1000's is the function itself
    dev=/sys/class/net/$1
    link=$(readlink "$dev/device/driver")
    case "${link##*/}" in
        virtio_net) link=$(readlink -f "$dev/device/..") ;;
        *) link=$(readlink -f "$dev/device") ;;
    esac
    echo "${link##*/}"
}

nic_json() {
    ifname=$1
    dev=/sys/class/net/$ifname
    driver=$(readlink "$dev/device/driver")
    driver=${driver##*/}
    read -r mac <"$dev/address"
    pci=$(nic_pci "$ifname")
    set -- $(ethtool_fields "$ifname" Combined RX TX)
    max_combined=$1 combined=$2 rx_max=$3 rx_cur=$4 tx_max=$5 tx_cur=$6
    # the values in place, without a subshell each: strings escaped only when they hold " or \
    case "$ifname$driver$mac$pci" in
        *[\\\"]*) ifname=$(json_esc "$ifname") driver=$(json_esc "$driver") mac=$(json_esc "$mac") pci=$(json_esc "$pci") ;;
    esac
    for v in combined max_combined rx_cur tx_cur rx_max tx_max; do
        eval "is_uint \"\$$v\"" || eval "$v=null"
    done
    printf '{"ifname": "%s", "driver": "%s", "mac": "%s", "pci": "%s", "combined": %s, "max_combined": %s, "rx_ring": %s, "tx_ring": %s, "rx_ring_max": %s, "tx_ring_max": %s}' \
        "$ifname" "$driver" "$mac" "$pci" "$combined" "$max_combined" "$rx_cur" "$tx_cur" "$rx_max" "$tx_max"
}

# --- modes --------------------------------------------------------------------------------------------
mode_verify() {
    load_modules net
    find_channel
    wait_nics
    for ifname in $(virtio_nics); do
        emit "LABCTL-NIC $(nic_json "$ifname")"
    done
}

bind_pci() {
    # bind_pci PCI DRIVER: hand a PCI device to DRIVER through driver_override
    pci=$1 drv=$2
    d=/sys/bus/pci/devices/$pci
    echo "$drv" >"$d/driver_override" || return 1
    if [ -e "$d/driver" ]; then
        echo "$pci" >"$d/driver/unbind" || return 1
    fi
    echo "$pci" >/sys/bus/pci/drivers_probe
    bound=$(readlink "$d/driver")
    bound=${bound##*/}
    [ "$bound" = "$drv" ] || [ "$bound" = "$(echo "$drv" | tr - _)" ]
}

arg_value() {
    # arg_value NAME: the value of --NAME=VALUE among the testpmd arguments in "$targs" (empty if absent)
    for a in $targs; do
        case "$a" in --"$1"=*) echo "${a#*=}"; return ;; esac
    done
}

parse_testpmd_args() {
    # $1: comma-separated testpmd application arguments -> targs, rxq, txq, nbcores, lcores
    targs=$(echo "${1:--i,--forward-mode=io}" | tr ',' ' ')
    for a in $targs; do
        case "$a" in -*) ;; *) error args "not a testpmd argument: $a"; return 1 ;; esac
        case "$a" in *[!A-Za-z0-9_.=:/+-]*) error args "bad testpmd argument: $a"; return 1 ;; esac
    done
    rxq=$(arg_value rxq); rxq=${rxq:-1}
    txq=$(arg_value txq); txq=${txq:-$rxq}
    nbcores=$(arg_value nb-cores); nbcores=${nbcores:-1}
    for v in "$rxq" "$txq" "$nbcores"; do
        is_uint "$v" || { error args "not a number: $v"; return 1; }
    done
    ncpu=$(nproc)
    # the main lcore floats over every vCPU (it mostly sleeps at the prompt), worker i runs on vCPU i-1,
    # as the embedded lab places its main lcore and one worker per vCPU
    lcores="0@(0-$((ncpu - 1)))"
    i=1
    while [ "$i" -le "$nbcores" ]; do
        lcores="$lcores,$i@$(( (i - 1) % ncpu ))"
        i=$((i + 1))
    done
    if [ "$nbcores" -gt "$ncpu" ]; then
        emit "LABCTL-WARN {\"message\": \"$nbcores forwarding cores on $ncpu vCPUs: some share a vCPU\"}"
    fi
    if [ -n "$maxq" ] && { [ "$rxq" -gt "$maxq" ] || [ "$txq" -gt "$maxq" ]; }; then
        emit "LABCTL-WARN {\"message\": \"rxq/txq $rxq/$txq above the NICs' $maxq queue pairs, using $maxq\"}"
        [ "$rxq" -gt "$maxq" ] && rxq=$maxq
        [ "$txq" -gt "$maxq" ] && txq=$maxq
        clamped=
        for a in $targs; do
            case "$a" in --rxq=*) a="--rxq=$rxq" ;; --txq=*) a="--txq=$txq" ;; esac
            clamped="$clamped $a"
        done
        targs=$clamped
    fi
    return 0
}

report_nics() {
    # the virtio stack loaded, the channel found, one LABCTL-NIC line per virtio-net NIC; sets nics,
    # nics_json, maxq (the fewest queue pairs of any NIC) and pcis
    load_modules net
    find_channel
    wait_nics
    nics=$(virtio_nics)
    if [ -z "$nics" ]; then
        error nics "no virtio-net NIC found"
        return 1
    fi
    maxq=
    pcis=
    nics_json=
    for ifname in $nics; do
        js=$(nic_json "$ifname")
        nics_json="$nics_json$js
"
        emit "LABCTL-NIC $js"
        q=${js#*\"max_combined\": }
        q=${q%%,*}  # the NIC's most queue pairs, read from its line (no second ethtool)
        if is_uint "$q"; then
            if [ -z "$maxq" ] || [ "$q" -lt "$maxq" ]; then maxq=$q; fi
        fi
        pcis="$pcis $(nic_pci "$ifname")"
    done
    [ -n "$maxq" ] || maxq=1
    return 0
}

prepare_ports() {
    # the virtio-net NICs reported (LABCTL-NIC), bound to the userspace driver, hugepages reserved;
    # sets nics_json, maxq, allow
    report_nics || return 1
    bind_ports || return 1
    reserve_hugepages
}

bind_ports() {
    # every NIC of pcis bound to labctl.driver; sets driver, allow
    driver=${LABCTL_driver:-uio_pci_generic}
    case "$driver" in
        uio_pci_generic) load_modules uio ;;
        vfio-pci|vfio_pci)
            driver=vfio-pci
            # only useful with a (virtual) IOMMU, or with a kernel built with VFIO_NOIOMMU
            load_modules vfio "vfio:enable_unsafe_noiommu_mode=1"
            ;;
        *) error args "unknown labctl.driver=$driver"; return 1 ;;
    esac
    allow=
    for pci in $pcis; do
        if ! bind_pci "$pci" "$driver"; then
            hint=
            if [ "$driver" = vfio-pci ] && [ -z "$(ls /sys/kernel/iommu_groups 2>/dev/null)" ]; then
                hint=" (no IOMMU in this guest and no vfio no-IOMMU mode in this kernel: use uio_pci_generic)"
            fi
            error bind "cannot bind $pci to $driver$hint"
            return 1
        fi
        allow="$allow -a $pci"
    done
    return 0
}

reserve_hugepages() {
    # hugepages (2 MiB): DPDK needs physical addresses for a PCI device without an IOMMU
    mem_kb=$(awk '/^MemTotal:/ { print $2 }' /proc/meminfo)
    if [ -n "$LABCTL_hugepages" ]; then
        pages=$LABCTL_hugepages
        is_uint "$pages" || { error args "not a number: labctl.hugepages=$pages"; return 1; }
    else
        pages=$((mem_kb / 2 / 2048))
        [ "$pages" -gt 512 ] && pages=512
    fi
    echo "$pages" >/proc/sys/vm/nr_hugepages
    got=$(cat /proc/sys/vm/nr_hugepages)
    mount -t hugetlbfs nodev /dev/hugepages
    emit "LABCTL-INFO {\"hugepages\": $got, \"driver\": $(json_str "$driver")}"
    if [ "$got" -lt 16 ]; then
        error hugepages "only $got hugepages could be reserved"
        return 1
    fi
    return 0
}

testpmd_argv() {
    # the whole dpdk-testpmd command line (in "$@" of the caller) from targs and lcores
    topology=${LABCTL_topology:-paired}
    topo=
    [ "$topology" != paired ] && topo="--port-topology=$topology"
    echo "--lcores $lcores -n 1 --in-memory --iova-mode=pa $allow -- $targs $topo"
}

testpmd_report() {
    # testpmd's output on stdin -> LABCTL lines on stdout (and the console); the whole output to $log.
    # Per port: "Forward statistics for port N" blocks; per queue (several streams per port): "Forward
    # Stats for RX Port= P/Queue= Q -> TX Port= P/Queue= Q" blocks (testpmd 22.11 fwd_stream_stats_display).
    awk -v ready="$ready" -v debug="${LABCTL_debug:-0}" -v console="$1" -v logfile="$log" -v ended="$ended" '
        function out(s) {
            print s
            fflush()
            if (console != "") { print s > console; fflush(console) }
        }
        function num(s) { return (s ~ /^[0-9]+$/) ? s : 0 }
        function now(   l, a) {
            getline l < "/proc/uptime"; close("/proc/uptime")
            split(l, a, " ")
            return a[1]
        }
        function report(final,   i, js, qs, rx, tx, txd, rxd) {
            js = ""
            rx = tx = txd = rxd = 0
            for (i = 0; i < nports; i++) {
                p = order[i]
                if (js != "") js = js ", "
                js = js sprintf("{\"port\": %d, \"rx_packets\": %d, \"rx_dropped\": %d, \"tx_packets\": %d, \"tx_dropped\": %d}", p, prx[p], prxd[p], ptx[p], ptxd[p])
                rx += prx[p]; tx += ptx[p]; txd += ptxd[p]; rxd += prxd[p]
            }
            qs = ""
            for (i = 0; i < nstreams; i++) {
                if (qs != "") qs = qs ", "
                qs = qs sprintf("{\"rx_port\": %d, \"rx_queue\": %d, \"tx_port\": %d, \"tx_queue\": %d, \"rx_packets\": %d, \"tx_packets\": %d, \"tx_dropped\": %d}", srp[i], srq[i], stp[i], stq[i], srx[i], stx[i], std[i])
            }
            seq++
            out(sprintf("LABCTL-STATS {\"seq\": %d, \"t\": %.1f, \"final\": %s, \"rx_packets\": %d, \"rx_dropped\": %d, \"tx_packets\": %d, \"tx_dropped\": %d, \"ports\": [%s], \"streams\": [%s]}", seq, now() - t0, final ? "true" : "false", rx, rxd, tx, txd, js, qs))
            nports = 0
            nstreams = 0
            delete seen
        }
        BEGIN { t0 = now(); nports = 0; nstreams = 0; final = 0; port = -1; stream = -1; seq = 0 }
        {
            print $0 >> logfile
            if (debug == "1") { printf "testpmd[%.1f]: %s\n", now() - t0, $0 > "/dev/console" }
        }
        /Number of available ports:/ && !isready { isready = 1; printf "" > ready; close(ready); out("LABCTL-INFO {\"testpmd\": \"ready\"}") }
        /Telling cores to stop/ { final = 1 }
        /Forward Stats for RX Port=/ {
            s = $0; gsub(/[^0-9]+/, " ", s); split(s, f, " ")
            stream = nstreams++; srp[stream] = f[1]; srq[stream] = f[2]; stp[stream] = f[3]; stq[stream] = f[4]
            srx[stream] = stx[stream] = std[stream] = 0
            port = -1
            next
        }
        stream >= 0 && /RX-packets:/ {
            for (i = 1; i < NF; i++) {
                if ($i == "RX-packets:") srx[stream] = num($(i + 1))
                if ($i == "TX-packets:") stx[stream] = num($(i + 1))
                if ($i == "TX-dropped:") std[stream] = num($(i + 1))
            }
            stream = -1
            next
        }
        /Forward statistics for port/ {
            s = $0; sub(/.*for port[ \t]*/, "", s); sub(/[^0-9].*/, "", s)
            port = s + 0
            stream = -1
            if (!(port in seen)) { seen[port] = 1; order[nports++] = port }
            next
        }
        /Accumulated forward statistics for all ports/ { port = -1; if (nports > 0) report(final); next }
        port >= 0 && /RX-packets:/ {
            for (i = 1; i < NF; i++) {
                if ($i == "RX-packets:") prx[port] = num($(i + 1))
                if ($i == "RX-dropped:") prxd[port] = num($(i + 1))
            }
        }
        port >= 0 && /TX-packets:/ {
            for (i = 1; i < NF; i++) {
                if ($i == "TX-packets:") ptx[port] = num($(i + 1))
                if ($i == "TX-dropped:") ptxd[port] = num($(i + 1))
            }
        }
        /EAL: Error|EAL: FATAL|Cannot init|Fail to|Failed to|error/ { lasterr = $0 }
        END {
            printf "" > ended; close(ended)
            # with one port there is no accumulated block: report what was seen
            if (nports > 0) report(final)
            if (lasterr != "") {
                gsub(/\\/, "\\\\", lasterr); gsub(/"/, "\\\"", lasterr)
                out("LABCTL-INFO {\"testpmd_last_error\": \"" lasterr "\"}")
            }
        }'
}

mode_workload() {
    # testpmd runs for labctl.duration seconds, driven by a script, then the appliance powers off
    duration=${LABCTL_duration:-30}
    period=${LABCTL_period:-5}
    tx_first=${LABCTL_tx_first:-0}
    for v in "$duration" "$period" "$tx_first"; do
        is_uint "$v" || { error args "not a number: $v"; return; }
    done
    [ "$period" -gt 0 ] || period=1
    prepare_ports || return
    parse_testpmd_args "$LABCTL_testpmd" || return
    ready=/tmp/labctl.ready
    log=/tmp/testpmd.log
    ended=/tmp/labctl.ended
    ready_timeout=${LABCTL_ready_timeout:-300}
    is_uint "$ready_timeout" || ready_timeout=300
    rm -f "$ready" "$ended"
    start="start"
    [ "$tx_first" -gt 0 ] && start="start tx_first $tx_first"
    # shellcheck disable=SC2046
    set -- $(testpmd_argv)
    emit "LABCTL-INFO {\"testpmd\": $(json_str "dpdk-testpmd $*"), \"lcores\": $(json_str "$lcores"), \"rxq\": $rxq, \"txq\": $txq}"
    {
        # wait until testpmd has set its ports up, then drive it like a person at its prompt;
        # give up as soon as testpmd (and so the awk reading it) has gone
        nap() {
            n=0
            while [ "$n" -lt "$1" ]; do
                [ -e "$ended" ] && return 1
                sleep 1
                n=$((n + 1))
            done
        }
        # answered only once testpmd has set its ports up and reads its prompt
        echo "show port summary all"
        wait_file "$ready_timeout" "$ready" "$ended"
        if [ -e "$ready" ] && nap 1; then
            echo "$start"
            t=0
            while [ "$t" -lt "$duration" ]; do
                step=$period
                [ $((t + step)) -gt "$duration" ] && step=$((duration - t))
                nap "$step" || break
                t=$((t + step))
                [ "$t" -lt "$duration" ] && echo "show fwd stats all"
            done
            echo "stop"
            nap 2
        fi
        echo "quit"
        nap 30
        } | LD_PRELOAD="$LABCTL_STDBUF_PRELOAD" _STDBUF_O=L dpdk-testpmd "$@" 2>&1 | {
            if [ -n "$CHANNEL_DEV" ]; then testpmd_report "" | tee -a "$CHANNEL_DEV"; else testpmd_report ""; fi
        }
    if [ ! -e "$ready" ]; then
        error testpmd "dpdk-testpmd did not bring its ports up; its last lines follow"
        tail -n 40 "$log"
    elif ! grep -q 'Telling cores to stop' "$log"; then
        error testpmd "dpdk-testpmd stopped before the end of the run; its last lines follow"
        tail -n 40 "$log"
    fi
}

# --- serve: a forwarder driven over the channel ---------------------------------------------------------
fwd_running=
fwd_start() {
    # FWD ARG,...: start testpmd reading its prompt from a FIFO (fd 3), reporting on the channel (fd 4)
    [ -n "$fwd_running" ] && fwd_end
    parse_testpmd_args "$1" || return
    ready=/tmp/labctl.ready
    log=/tmp/testpmd.log
    ended=/tmp/labctl.ended
    fifo=/tmp/testpmd.in
    rm -f "$ready" "$ended" "$fifo" "$log"
    mkfifo "$fifo"
    # shellcheck disable=SC2046
    set -- $(testpmd_argv)
    emit "LABCTL-INFO {\"testpmd\": $(json_str "dpdk-testpmd $*"), \"lcores\": $(json_str "$lcores"), \"rxq\": $rxq, \"txq\": $txq}"
    (LD_PRELOAD="$LABCTL_STDBUF_PRELOAD" _STDBUF_O=L dpdk-testpmd "$@" <"$fifo" 2>&1 | testpmd_report /dev/console >&4) &
    fwd_pid=$!
    exec 3>"$fifo"
    fwd_running=1
    echo "show port summary all" >&3
    ready_timeout=${LABCTL_ready_timeout:-300}
    is_uint "$ready_timeout" || ready_timeout=300
    wait_file "$ready_timeout" "$ready" "$ended"
    if [ ! -e "$ready" ]; then
        error testpmd "dpdk-testpmd did not bring its ports up: $(tail -n 3 "$log" | tr '\n"\\' '   ')"
        fwd_end
    fi
}

fwd_end() {
    # END: stop forwarding, quit testpmd, wait for it
    [ -n "$fwd_running" ] || { emit "LABCTL-FWD-END {\"running\": false}"; return; }
    echo "stop" >&3 2>/dev/null
    echo "quit" >&3 2>/dev/null
    exec 3>&-
    wait_file 30 "$ended"
    [ -e "$ended" ] || kill "$fwd_pid" 2>/dev/null
    wait "$fwd_pid" 2>/dev/null
    fwd_running=
    emit "LABCTL-FWD-END {\"running\": true, \"clean\": $([ -e "$ended" ] && echo true || echo false)}"
}

# --- serve, kernel stack: the NICs stay with virtio_net; iperf3/sockperf jobs driven over the channel --------
nic_of_mac() {
    for ifname in $(virtio_nics); do
        [ "$(cat "/sys/class/net/$ifname/address")" = "$1" ] && { echo "$ifname"; return 0; }
    done
    error args "no virtio-net NIC with MAC $1"
    return 1
}

kernel_net() {
    # NET MAC ADDR/PREFIX | NET MAC dhcp
    set -- $1
    ifname=$(nic_of_mac "$1") || return
    addr=$2
    ip link set "$ifname" up
    if [ "$addr" = dhcp ]; then
        printf '%s\n' '#!/bin/sh' \
            'case "$1" in bound|renew) ip addr flush dev "$interface"; ip addr add "$ip/${mask:-24}" dev "$interface"; echo "$ip/${mask:-24}" >/tmp/labctl.dhcp ;; esac' \
            >/tmp/labctl-udhcpc.sh
        chmod 755 /tmp/labctl-udhcpc.sh
        rm -f /tmp/labctl.dhcp
        udhcpc -i "$ifname" -n -q -t 20 -T 2 -s /tmp/labctl-udhcpc.sh >/dev/null 2>&1
        addr=$(cat /tmp/labctl.dhcp 2>/dev/null)
        [ -n "$addr" ] || { error net "no DHCP lease on $ifname"; return; }
    else
        case "$addr" in ''|*[!0-9./]*) error args "bad address: $addr"; return ;; esac
        ip addr flush dev "$ifname"
        ip addr add "$addr" dev "$ifname" || { error net "ip addr add $addr dev $ifname failed"; return; }
    fi
    emit "LABCTL-NET {\"ifname\": $(json_str "$ifname"), \"mac\": $(json_str "$1"), \"addr\": $(json_str "$addr")}"
}

kernel_queues() {
    # QUEUES MAC N: the combined channels the driver uses, read back
    set -- $1
    ifname=$(nic_of_mac "$1") || return
    is_uint "$2" || { error args "not a number: $2"; return; }
    msg=$(ethtool -L "$ifname" combined "$2" 2>&1)
    rc=$?
    emit "LABCTL-QUEUES {\"rc\": $rc, \"message\": $(json_str "$(echo "$msg" | tr '\n\t' '  ')"), \"nic\": $(nic_json "$ifname")}"
}

kernel_run() {
    # RUN ID PORT ARG,ARG,...: a workload tool in the background, its output reported when it ends
    set -- $1
    id=$1 port=$2
    is_uint "$id" && is_uint "$port" || { error args "RUN ID PORT ARGS: not numbers: $id $port"; return; }
    args=$(echo "$3" | tr ',' ' ')
    for a in $args; do
        case "$a" in *[!A-Za-z0-9_.=:/+-]*) error args "bad argument: $a"; return ;; esac
    done
    set -- $args
    case "$1" in iperf3|sockperf) ;; *) error args "not a workload tool: $1"; return ;; esac
    out=/tmp/labctl-job-$id.out
    rm -f "$out"
    ( "$@" >"$out" 2>&1 </dev/null; rc=$?
      emit "LABCTL-RESULT {\"id\": $id, \"rc\": $rc, \"output\": $(json_text "$out")}" ) &
    if [ "$port" -gt 0 ]; then
        hex=$(printf '%04X' "$port")
        i=0
        while ! awk -v p=":$hex" '$2 ~ (p "$") && $4 == "0A" { found = 1 } END { exit !found }' /proc/net/tcp; do
            i=$((i + 1))
            [ "$i" -gt 300 ] && { error run "job $id: nothing listens on port $port after 30 s"; return; }
            sleep 0.1
        done
    fi
    emit "LABCTL-RUNNING {\"id\": $id}"
}

kernel_stat() {
    # STAT MAC: the guest's CPU, the NIC's per-queue interrupts and counters, TCP's counters
    ifname=$(nic_of_mac "$1") || return
    grep '^cpu' /proc/stat >/tmp/labctl.stat
    grep 'virtio' /proc/interrupts >/tmp/labctl.irq
    ethtool -S "$ifname" >/tmp/labctl.eth 2>&1
    grep '^Tcp:' /proc/net/snmp >/tmp/labctl.snmp
    emit "LABCTL-STAT {\"stat\": $(json_text /tmp/labctl.stat), \"interrupts\": $(json_text /tmp/labctl.irq), \"ethtool\": $(json_text /tmp/labctl.eth), \"snmp\": $(json_text /tmp/labctl.snmp)}"
}

kernel_kill() {
    # KILL: every RUN job (the appliance runs nothing else named so)
    n=0
    for pid in $(pidof iperf3 sockperf); do
        kill "$pid" 2>/dev/null && n=$((n + 1))
    done
    i=0
    while [ -n "$(pidof iperf3 sockperf)" ] && [ $i -lt 20 ]; do
        sleep 0.1
        i=$((i + 1))
    done
    for pid in $(pidof iperf3 sockperf); do kill -9 "$pid" 2>/dev/null; done
    emit "LABCTL-KILLED {\"n\": $n}"
}

prepare_kernel() {
    # the NICs reported and left to virtio_net, loopback up
    report_nics || return 1
    ip link set lo up
    for ifname in $nics; do ip link set "$ifname" up; done
    return 0
}

macs_present() {
    # every MAC of labctl.macs on a network device with its driver bound (0), else 1
    for mac in $(echo "$LABCTL_macs" | tr ',' ' '); do
        found=
        for d in /sys/class/net/*; do
            [ -e "$d/device/driver" ] || continue
            [ "$(cat "$d/address" 2>/dev/null)" = "$mac" ] && { found=1; break; }
        done
        [ -n "$found" ] || return 1
    done
    return 0
}

reprobe() {
    # REPROBE: the host detached the NICs and attached new ones (same MACs, new <driver> settings): wait for
    # them (ACPI PCI hot-plug: the kernel's acpiphp probes the slot; a bus rescan at once and again after
    # 5 s), then report, bind or bring them up as at boot, and answer as HELLO does
    [ -n "$fwd_running" ] && fwd_end
    mark_cs t_asked
    i=0
    while ! macs_present; do
        i=$((i + 1))
        # a rescan at once: the devices are in QEMU's slots already (attach returned), and the scan finds
        # them sooner than the ACPI notification's handler does under TCG; again after 5 s in case
        case "$i" in 1|50) echo 1 >/sys/bus/pci/rescan 2>/dev/null ;; esac
        if [ "$i" -ge 600 ]; then
            error reprobe "the NICs $LABCTL_macs did not all come back within 60 s"
            return
        fi
        sleep 0.1
    done
    mark_cs t_found
    nics_settled=1
    case "$stack" in
        kernel) prepare_kernel; rc=$? ;;
        *) report_nics && { mark_cs t_reported; bind_ports; }; rc=$? ;;
    esac
    nics_settled=
    [ "$rc" -eq 0 ] || return
    mark_cs t_ready
    [ -n "$t_reported" ] || t_reported=$t_ready
    # where the guest's time went, in hundredths of a second: the NICs found, read (LABCTL-NIC), bound or up
    steps="{\"found\": $(( t_found - t_asked )), \"reported\": $(( t_reported - t_found )), \"bound\": $(( t_ready - t_reported ))}"
    emit "LABCTL-READY {\"vcpus\": $(nproc), \"maxq\": $maxq, \"stack\": $(json_str "$stack"), \"reprobed\": true, \"reprobe_cs\": $steps}"
    t_reported=
}

mode_serve() {
    if [ -z "$LABCTL_channel" ]; then
        error args "serve mode needs labctl.channel"
        return
    fi
    stack=${LABCTL_stack:-dpdk}
    case "$stack" in
        kernel) prepare_kernel || return ;;
        dpdk) prepare_ports || return ;;
        *) error args "unknown labctl.stack=$stack"; return ;;
    esac
    if [ -z "$CHANNEL_DEV" ]; then
        error channel "no virtio-serial port named $LABCTL_channel"
        return
    fi
    exec 4<>"$CHANNEL_DEV"
    CHANNEL_FD=4
    while :; do
        if ! read -r cmd args <&4; then
            sleep 0.2  # the host is not connected: the port reads end-of-file
            continue
        fi
        case "$cmd" in
            HELLO)
                printf '%s' "$nics_json" | while read -r js; do [ -n "$js" ] && emit "LABCTL-NIC $js"; done
                emit "LABCTL-READY {\"vcpus\": $(nproc), \"maxq\": $maxq, \"stack\": $(json_str "$stack")}"
                ;;
            FWD)
                if [ "$stack" = kernel ]; then
                    error args "no forwarder with labctl.stack=kernel (the NICs stay with virtio_net)"
                else
                    fwd_start "$args"
                fi
                ;;
            NET) kernel_net "$args" ;;
            QUEUES) kernel_queues "$args" ;;
            RUN) kernel_run "$args" ;;
            STAT) kernel_stat "$args" ;;
            KILL) kernel_kill ;;
            TP)
                if [ -n "$fwd_running" ]; then
                    case "$args" in *[!A-Za-z0-9_\ .-]*|'') error args "bad testpmd command: $args" ;;
                                    *) echo "$args" >&3 ;; esac
                else
                    error args "no forwarder is running (send FWD first)"
                fi
                ;;
            END) fwd_end ;;
            REPROBE) reprobe ;;
            POWEROFF)
                [ -n "$fwd_running" ] && fwd_end
                [ "$stack" = kernel ] && kernel_kill
                break
                ;;
            '') ;;
            *) error args "unknown command: $cmd" ;;
        esac
    done
}

# --- main -----------------------------------------------------------------------------------------------
timeout_s=${LABCTL_timeout:-$(( ${LABCTL_duration:-30} + 600 ))}
[ "$LABCTL_mode" = serve ] && timeout_s=${LABCTL_timeout:-86400}
is_uint "$timeout_s" || timeout_s=900
( sleep "$timeout_s"; echo "LABCTL-ERROR {\"stage\": \"timeout\", \"message\": \"no end after $timeout_s s\"}"; echo "LABCTL-DONE"; poweroff -f ) &

echo "LABCTL-BOOT {\"kernel\": \"$KVER\", \"mode\": \"$LABCTL_mode\", \"uptime\": $(awk '{ print $1 }' /proc/uptime)}"
case "$LABCTL_mode" in
    verify) mode_verify ;;
    workload) mode_workload ;;
    serve) mode_serve ;;
    shell) setsid cttyhack sh ;;
    *) error args "unknown labctl.mode=$LABCTL_mode" ;;
esac
finish
