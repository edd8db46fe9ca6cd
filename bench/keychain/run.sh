#!/usr/bin/env bash
# The keychain against GNOME Keyring, alternately in one run on this machine.
#   bash bench/keychain/run.sh [rounds]
# Needs: apt-get install gnome-keyring dbus dbus-x11 python3-secretstorage; a release build:
#   swift build -c release --product laenclaved && swift build -c release --product la-bench
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3}
gnome() {
    local n=$1 home
    home=$(mktemp -d)
    HOME=$home XDG_DATA_HOME=$home/data XDG_RUNTIME_DIR=$home/run dbus-run-session -- sh -c '
        mkdir -p "$XDG_RUNTIME_DIR"
        printf %s "bench-password" | gnome-keyring-daemon --foreground --unlock --components=secrets >/dev/null 2>&1 &
        daemon=$!
        /usr/bin/python3 bench/keychain/gnome_keyring.py '"$n"'
        kill $daemon' 
    rm -rf "$home"
}
for round in $(seq "$rounds"); do
    echo "# round $round"
    .build/release/la-bench keychain 1000
    gnome 1000
    .build/release/la-bench keychain 100000
done
