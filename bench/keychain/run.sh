#!/usr/bin/env bash
# The keychain against GNOME Keyring, alternately in one run on this machine.
#   bash bench/keychain/run.sh [rounds]
# Needs: apt-get install gnome-keyring dbus dbus-x11 python3-secretstorage; a release build:
#   swift build -c release --product laenclaved && swift build -c release --product la-bench
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3}
gnome() { bash bench/keychain/gnome-session.sh /usr/bin/python3 bench/keychain/gnome_keyring.py "$1"; }
for round in $(seq "$rounds"); do
    echo "# round $round"
    .build/release/la-bench keychain 1000
    gnome 1000
    .build/release/la-bench keychain 100000
done
