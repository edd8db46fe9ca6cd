#!/usr/bin/env bash
# SecItemAdd + SecItemCopyMatching from 16 threads against GNOME Keyring's store + look-up from 16
# threads, alternately in one run on this machine (issue 29's speed figure).
#   bash bench/keychain/secitem_threads.sh [rounds] [pairs-per-thread]
# Needs: apt-get install gnome-keyring dbus dbus-x11 python3-secretstorage; a release build:
#   swift build -c release --product laenclaved && swift build -c release --product la-bench
# (BUILD_DIR: where those are, default .build/release.)
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3}
pairs=${2:-200}
build=${BUILD_DIR:-.build/release}
gnome() { bash bench/keychain/gnome-session.sh /usr/bin/python3 bench/keychain/gnome_keyring_threads.py "$pairs"; }
for round in $(seq "$rounds"); do
    echo "# round $round"
    LAENCLAVED_PATH=$PWD/$build/laenclaved "$build/la-bench" secitem-threads "$pairs"
    gnome
done
