#!/usr/bin/env bash
# Runs COMMAND… inside a private D-Bus session with a fresh, unlocked GNOME Keyring in a throw-away
# home (the peer the keychain benchmarks measure against); removes the home afterwards.
#   bash bench/keychain/gnome-session.sh COMMAND [ARG…]
set -euo pipefail
home=$(mktemp -d)
trap 'rm -rf "$home"' EXIT
HOME=$home XDG_DATA_HOME=$home/data XDG_RUNTIME_DIR=$home/run dbus-run-session -- sh -c '
    mkdir -p "$XDG_RUNTIME_DIR"
    printf %s "bench-password" | gnome-keyring-daemon --foreground --unlock --components=secrets >/dev/null 2>&1 &
    daemon=$!
    "$@"
    status=$?
    kill $daemon
    exit $status' sh "$@"
