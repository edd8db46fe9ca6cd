#!/usr/bin/env bash
# What pam_laenclave adds to `sudo true` (issue 32), measured against pam_permit in the same run:
#   A  pam_permit alone (the limit: sudo itself, PAM, fork and exec)
#   B  pam_laenclave with a queued matching touch (the whole path: connect, hello, the request,
#      the facts, the evaluation with its durable commit, the answer), then pam_permit
#   C  pam_laenclave with no daemon at its socket (the unavailable path), then pam_permit
#   D  pam_laenclave within its reuse window (no sensor, no commit: module and daemon alone), then
#      pam_permit; before each, an untimed sudo through D with a queued touch makes D's the last match
#   E  B run from a tmux pane with one client attached at the seat (where tmux is installed): the
#      daemon walks up to the tmux server and lists every process for its clients; run after the
#      others, in a phase of its own
# Rounds alternate A, B, C, D so load falls on all alike. Prints p50 and p99 per variant, what each
# adds over A, and the CPU time sudo (with the module) and the daemon spend per run.
#
#   sudo bash bench/pam/run.sh [runs]            # default 300 per variant
#
# Needs root, sudo, and release binaries: .build/release/{laenclaved,lactl} (swift build -c release
# --product laenclaved --product lactl) or those scripts/build-deb leaves in .build-deb/release.
# It makes a throw-away user, PAM services, a sudoers drop-in and a logind session record of its
# own (as PAMModuleTests does), and removes them all at the end.
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${1:-300}
[ "$(id -u)" -eq 0 ] || { echo "run as root" >&2; exit 2; }
bin=.build/release
[ -x "$bin/laenclaved" ] || bin=.build-deb/release
[ -x "$bin/laenclaved" ] && [ -x "$bin/lactl" ] || { echo "no release laenclaved and lactl" >&2; exit 2; }
module=$(pwd)/$(bash scripts/build-pam-module .build/pam/pam_laenclave.so)

tag=labench$$
user=$tag
work=$(mktemp -d /tmp/pam-bench.XXXXXX)
chmod 755 "$work"
# The hierarchy a process's session is read from: systemd's named one where there is one, else the
# unified one (cgroup v2 alone: /sys/fs/cgroup itself).
for root in /sys/fs/cgroup/systemd /sys/fs/cgroup/unified /sys/fs/cgroup; do
    [ -w "$root/cgroup.procs" ] && break
done
cgroup=$root/session-$tag.scope
daemon=
cleanup() {
    # Out of the session's cgroup first, or it cannot go.
    echo $$ >"$(dirname "$cgroup")/cgroup.procs" 2>/dev/null || true
    tmux -L "$tag-e" kill-server 2>/dev/null || true
    tmux -L "$tag-c" kill-server 2>/dev/null || true
    [ -n "$daemon" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null || true
    rm -f /etc/pam.d/$tag-* /etc/sudoers.d/$tag /run/sudo/ts/$user
    userdel "$user" 2>/dev/null || true
    rmdir "$cgroup" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

useradd -M -s /bin/sh "$user"
mkdir -p "$work/logind/sessions" "$work/run" "$work/state" "$work/keys" "$cgroup"
chmod 755 "$work/run"
printf 'UID=%s\nREMOTE=0\nSEAT=seat0\n' "$(id -u "$user")" >"$work/logind/sessions/$tag"
: >"$work/laenclaved.conf"
printf 'auth required pam_unix.so nodelay\naccount required pam_unix.so\n' >/etc/pam.d/$tag-login
"$bin/laenclaved" --system --socket "$work/run/socket" --state-dir "$work/state" --key-file "$work/keys/master.key" \
    --config "$work/laenclaved.conf" --simulated-sensor touchid --allow-simulation --administration-pipe --tpm off \
    --passcode-cost 10 --passcode-minimum-length 4 --logind-directory "$work/logind" --pam-service $tag-login --log-file "$work/log" &
daemon=$!
for _ in $(seq 100); do [ -S "$work/run/socket" ] && break; sleep 0.05; done
cp "$bin/lactl" "$work/lactl"
as_user() { runuser -u "$user" -- "$work/lactl" "$@" --socket "$work/run/socket"; }
echo 2468 | as_user passcode set --stdin >/dev/null
echo 2468 | as_user enroll right-index --stdin >/dev/null

service() { # name, module line or empty
    { [ -n "$2" ] && echo "auth $2"; echo "auth required pam_permit.so"
      echo "account required pam_permit.so"; echo "session required pam_permit.so"; } >/etc/pam.d/$tag-${1,,}
}
# B and D must pass through the module itself (a failure ends the stack, and the run says so); C
# steps aside to pam_permit, as a real stack's pam_unix.
service A ""
service B "[success=done default=die] $module socket=$work/run/socket"
service C "[success=done default=ignore] $module socket=$work/none/socket"
service D "[success=done default=die] $module socket=$work/run/socket reuse=300"
service E "[success=done default=die] $module socket=$work/run/socket"

# One timed `sudo true` through service $1, by the user, in the session; nanoseconds on stdout.
# (Linux-PAM lowercases service names: the files are named in lower case.)
sudo_once() {
    printf 'Defaults:%s pam_service=%s-%s, timestamp_timeout=0, !lecture\n%s ALL=(ALL) ALL\n' \
        "$user" "$tag" "${1,,}" "$user" >/etc/sudoers.d/$tag
    chmod 0440 /etc/sudoers.d/$tag
    local start end
    start=$(date +%s%N)
    setpriv --reuid="$user" --regid="$user" --init-groups -- sudo -S true </dev/null >/dev/null 2>&1 \
        || { echo "sudo failed through $1" >&2; echo "$1" >>"$work/failures"; }
    end=$(date +%s%N)
    echo $((end - start))
}
cpu_of() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# What this shell's waited-for children spent (sudo and its module, with the timing's own date).
children_cpu() { awk '{print $16 + $17}' "/proc/$$/stat"; }
ticks=$(getconf CLK_TCK)

# The loop runs in the session's cgroup, as a person's terminal would.
echo $$ >"$cgroup/cgroup.procs"
# Warm caches (a first sudo through each).
sudo_once A >/dev/null
as_user simulate match >/dev/null
sudo_once B >/dev/null
sudo_once C >/dev/null
for v in A B C D; do : >"$work/$v"; done
daemon_cpu=0
sudo_cpu_a=0
sudo_cpu_b=0
for _ in $(seq "$runs"); do
    before=$(children_cpu)
    sudo_once A >>"$work/A"
    sudo_cpu_a=$((sudo_cpu_a + $(children_cpu) - before))
    as_user simulate match >/dev/null
    before=$(cpu_of "$daemon")
    children=$(children_cpu)
    sudo_once B >>"$work/B"
    sudo_cpu_b=$((sudo_cpu_b + $(children_cpu) - children))
    daemon_cpu=$((daemon_cpu + $(cpu_of "$daemon") - before))
    sudo_once C >>"$work/C"
    as_user simulate match >/dev/null
    sudo_once D >/dev/null
    sudo_once D >>"$work/D"
done

# E, in a tmux pane (its server started here, in the session) while another tmux's pane, also in
# the session, is attached to it. sudo runs without a terminal there (setsid), as B does when the bench runs without one.
if command -v tmux >/dev/null; then
    : >"$work/E"
    printf 'Defaults:%s pam_service=%s-e, timestamp_timeout=0, !lecture\n%s ALL=(ALL) ALL\n' \
        "$user" "$tag" "$user" >/etc/sudoers.d/$tag
    cat >"$work/e.sh" <<EOS
until [ -n "\$(tmux -L $tag-e list-clients)" ]; do sleep 0.05; done
for _ in \$(seq $runs); do
    runuser -u $user -- $work/lactl simulate match --socket $work/run/socket >/dev/null
    start=\$(date +%s%N)
    setsid setpriv --reuid=$user --regid=$user --init-groups -- sudo -S true </dev/null >/dev/null 2>&1 \
        || echo E >>$work/failures
    end=\$(date +%s%N)
    echo \$((end - start)) >>$work/E
done
touch $work/E.done
EOS
    tmux -L "$tag-e" -f /dev/null new-session -d -s e "bash $work/e.sh"
    env -u TMUX tmux -L "$tag-c" -f /dev/null new-session -d -s c "env -u TMUX tmux -L $tag-e attach -t e"
    for _ in $(seq $((runs * 10))); do [ -e "$work/E.done" ] && break; sleep 0.1; done
    [ -e "$work/E.done" ] || { echo "bench: the tmux phase did not finish" >&2; exit 1; }
fi
echo $$ >"$(dirname "$cgroup")/cgroup.procs"

if [ -s "$work/failures" ]; then
    echo "bench: $(wc -l <"$work/failures") runs failed (the module did not pass): the figures are not the module's" >&2
    exit 1
fi
pct() { sort -n "$1" | awk -v p="$2" '{a[NR]=$1} END {i=int(NR*p); if (i<1) i=1; printf "%.2f", a[i]/1e6}'; }
echo "pam_laenclave and sudo, $runs runs per variant, $(nproc) vCPUs, $(date -u +%Y-%m-%dT%H:%MZ)"
echo
echo "| variant | p50 ms | p99 ms | p50 added over pam_permit |"
echo "|---|---|---|---|"
a50=$(pct "$work/A" 0.5)
for v in A B C D E; do
    [ -s "$work/$v" ] || continue
    case $v in
        A) name="pam_permit alone (the limit)" ;;
        B) name="pam_laenclave, a queued matching touch" ;;
        C) name="pam_laenclave, no daemon (unavailable)" ;;
        D) name="pam_laenclave, within the reuse window" ;;
        E) name="pam_laenclave, a queued touch, from a tmux pane with a client attached" ;;
    esac
    p50=$(pct "$work/$v" 0.5)
    echo "| $name | $p50 | $(pct "$work/$v" 0.99) | $(awk -v x="$p50" -v y="$a50" 'BEGIN {printf "%.2f ms", x - y}') |"
done
echo
awk -v c="$daemon_cpu" -v a="$sudo_cpu_a" -v b="$sudo_cpu_b" -v t="$ticks" -v n="$runs" 'BEGIN {
    printf "CPU per run (clock ticks of %d Hz, averaged): sudo with pam_permit %.2f ms; sudo with pam_laenclave %.2f ms; the daemon %.2f ms\n", t, a * 1000 / t / n, b * 1000 / t / n, c * 1000 / t / n }'
echo "daemon RSS after: $(awk '/VmRSS/ {print $2, $3}' /proc/$daemon/status)"
