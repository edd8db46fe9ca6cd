#!/usr/bin/python3
"""GNOME Keyring over the Secret Service API (the Linux peer), measured like la-bench's keychain mode:
store N items, 300 random lookups by attribute (with the secret), 300 deletes by attribute.
Run inside a private D-Bus session with a fresh, unlocked keyring (see run.sh). Prints one JSON line."""
import json, random, statistics, sys, time
import secretstorage

n = int(sys.argv[1])
conn = secretstorage.dbus_init()
deadline = time.time() + 10
while True:
    try:
        collection = secretstorage.get_default_collection(conn)
        break
    except Exception:
        if time.time() > deadline:
            raise
        time.sleep(0.05)

def timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t

store = [timed(lambda i=i: collection.create_item(f"item {i}", {"service": "bench", "account": f"user{i}"},
                                                   f"secret-{i}".encode(), replace=True)) for i in range(n)]
rng = random.Random(7)
def lookup(j):
    items = list(collection.search_items({"service": "bench", "account": f"user{j}"}))
    assert items and items[0].get_secret() == f"secret-{j}".encode()
lookups = [timed(lambda j=rng.randrange(n): lookup(j)) for _ in range(300)]
victims = rng.sample(range(n), min(300, n))
deletes = [timed(lambda j=j: next(collection.search_items({"service": "bench", "account": f"user{j}"})).delete()) for j in victims]

def stats(xs):
    xs = sorted(xs)
    return {"p50_ms": xs[len(xs) // 2] * 1e3, "p99_ms": xs[min(len(xs) - 1, int(len(xs) * 0.99))] * 1e3, "ops_per_s": len(xs) / sum(xs)}

print(json.dumps({"peer": "gnome-keyring", "items": n, "store": stats(store), "lookup": stats(lookups), "delete": stats(deletes)}))
