#!/usr/bin/python3
"""GNOME Keyring over the Secret Service API, measured like `la-bench secitem-threads`: 16 threads,
each with its own D-Bus connection, store a small secret and read it back by attribute, PAIRS
times each. Run inside a private D-Bus session with a fresh, unlocked keyring (secitem_threads.sh).
Prints one JSON line."""
import json, sys, threading, time
import secretstorage

THREADS = 16
pairs = int(sys.argv[1]) if len(sys.argv) > 1 else 200

def collection_of(conn):
    deadline = time.time() + 10
    while True:
        try:
            return secretstorage.get_default_collection(conn)
        except Exception:
            if time.time() > deadline:
                raise
            time.sleep(0.05)

adds, copies, errors = [], [], []
lock = threading.Lock()
ready = threading.Barrier(THREADS + 1)

def worker(t):
    mine_add, mine_copy = [], []
    try:
        conn = secretstorage.dbus_init()
        collection = collection_of(conn)
    except Exception as e:
        errors.append(repr(e))
        ready.abort()  # the others (and the timer) stop waiting for this one
        return
    try:
        ready.wait()
        for i in range(pairs):
            attrs = {"service": "bench-threads", "account": f"thread{t}-{i}"}
            secret = f"secret-{t}-{i}".encode()
            s = time.perf_counter()
            collection.create_item(f"item {t}-{i}", attrs, secret, replace=True)
            mine_add.append(time.perf_counter() - s)
            s = time.perf_counter()
            found = list(collection.search_items(attrs))
            assert found and found[0].get_secret() == secret
            mine_copy.append(time.perf_counter() - s)
    except Exception as e:
        errors.append(repr(e))
    with lock:
        adds.extend(mine_add)
        copies.extend(mine_copy)

threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
for th in threads: th.start()
try:
    ready.wait()
except threading.BrokenBarrierError:
    pass
start = time.perf_counter()
for th in threads: th.join()
elapsed = time.perf_counter() - start
if errors:
    sys.exit("gnome-keyring: " + errors[0])

def stats(xs):
    xs = sorted(xs)
    return {"p50_ms": xs[len(xs) // 2] * 1e3, "p99_ms": xs[min(len(xs) - 1, int(len(xs) * 0.99))] * 1e3}

print(json.dumps({"peer": "gnome-keyring", "threads": THREADS, "pairs": THREADS * pairs, "add": stats(adds), "copy": stats(copies),
                  "pairs_per_s": round(THREADS * pairs / elapsed)}))
