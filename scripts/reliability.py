#!/usr/bin/env python3
"""The service's reliability figures (BENCHMARKS.md "Reliability"), against a real `serve`.

    python3 scripts/reliability.py ../shared/data/xwlb-news.jsonl.gz [--binary target/release/tantivy-dedup]

Starts `tantivy-dedup serve` on a fresh index in a temporary directory, under `ulimit -n 1024`
as on a stock machine, then measures:

1. memory: ten clients POST a 24 MB batch each at once (documents of the corpus under new
   ids); the server's peak RSS (VmHWM) against its RSS before, and how the requests were
   answered (200, or 503 + Retry-After when the queue is full);
2. availability: 2,000 idle connections and 16 slow uploads (headers of a 32 MiB body, then
   one byte a second) are held while one client posts a small batch every 100 ms for 20 s;
   the share of those writes answered 200 and their latency;
3. held connections (issue 33, item 3): 2,000 connections that each sent one byte of a head,
   held and renewed as soon as the server closes one (by a process of their own), while a new
   client GETs a list page on a fresh connection every 100 ms for 30 s: the GETs' latency
   (p50, p99, max). Twice: all from one address (127.0.0.1, the client's too), and spread
   over 20 loopback addresses (127.0.0.10-29), as from many clients;
4. stalled uploads (issue 33, item 8): uploads declare a 32 MiB body, send part of it and
   stall; from then on a client posts a 1 MB batch every 200 ms until one is taken, asking
   /healthz each time: how long the write queue was held (writes refused), what /healthz
   said meanwhile, and how and when the stalled uploads were answered. Twice: two uploads of
   22 MB (what fills the queue at 6 bytes of room a body byte), then nine of 29.5 MB (what
   fills it at a byte a byte, less room for the 1 MB batch);
5. memory under rounds (issue 33, item 7): 8 rounds of 16 concurrent 10 MB POSTs, each on a
   server of its own: with the default `queue_mib` and `index.writer_memory_mb` (256 each),
   and with 64 each; the peak RSS after each round against the bound README "Limits" states
   (the RSS at rest, plus `queue_mib`, plus `writer_memory_mb`, plus 160 MiB);
6. a full disk (issue 33, item 2; needs root, for a tmpfs): the index on a 160 MiB tmpfs,
   filled by another file once 2,000 documents are in; batches posted every 200 ms for 20 s:
   their answers, whether the server lived, what /healthz said; a restart on the disk still
   full (does it listen?); then the file removed: how long until a write is taken and
   /healthz says ok, and whether every acknowledged document is there. Three runs.

Prints one JSON object. Uses only the standard library.
"""

import argparse
import gzip
import json
import os
import resource
import selectors
import socket
import subprocess
import sys
import tempfile
import threading
import time


def rss_kib(pid, field):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def read_status(connection):
    """Reads an answer's status line from `connection`: its status, or "no answer" when the
    connection closed or failed before one came."""
    answer = b""
    try:
        while b"\r\n" not in answer:
            chunk = connection.recv(4096)
            if not chunk:
                break
            answer += chunk
    except OSError:
        pass
    parts = answer.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else "no answer"


def post(address, body, timeout=600):
    """POSTs NDJSON; the answer's status and the seconds it took. The body is sent from
    another thread, so that an answer given before the body is whole (a 503 when the queue is
    full, say) is still read."""
    host, port = address
    started = time.monotonic()
    connection = socket.create_connection(address, timeout=timeout)
    head = ("POST /v1/documents HTTP/1.1\r\nhost: %s:%d\r\ncontent-type: application/x-ndjson\r\n"
            "content-length: %d\r\nconnection: close\r\n\r\n" % (host, port, len(body))).encode()

    def send():
        try:
            connection.sendall(head + body)
        except OSError:
            pass

    sender = threading.Thread(target=send)
    sender.start()
    status = read_status(connection)
    elapsed = time.monotonic() - started
    connection.close()
    sender.join()
    return status, elapsed


def hold_connections(host, port, count, sources, seconds):
    """Holds `count` connections to (host, port) that each sent one byte of a request head,
    opening a new one whenever the server closes one, for `seconds`; from each address of
    `sources` in turn (the system's choice when empty). Prints what it did as JSON."""
    address = (host, port)
    selector = selectors.DefaultSelector()
    opened = renewed = failed = 0

    def open_one(slot):
        nonlocal opened, failed
        connection = socket.socket()
        connection.setblocking(False)
        try:
            if sources:
                connection.bind((sources[slot % len(sources)], 0))
            connection.connect_ex(address)
        except OSError:
            connection.close()
            failed += 1
            return
        opened += 1
        selector.register(connection, selectors.EVENT_WRITE, (slot, "connecting"))

    for slot in range(count):
        open_one(slot)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for key, _ in selector.select(0.1):
            connection, (slot, state) = key.fileobj, key.data
            if state == "connecting":
                if connection.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                    try:
                        connection.send(b"G")
                        selector.modify(connection, selectors.EVENT_READ, (slot, "held"))
                        continue
                    except OSError:
                        pass
            else:
                try:
                    if connection.recv(4096):
                        continue  # an answer to one byte: wait for the close
                except BlockingIOError:
                    continue
                except OSError:
                    pass
            # Closed by the server (or never connected): renew it.
            selector.unregister(connection)
            connection.close()
            renewed += 1
            open_one(slot)
    held = len(selector.get_map())
    json.dump({"opened": opened, "renewed": renewed, "connect_failures": failed,
               "open_at_end": held}, sys.stdout)
    print()


def get(address, path, timeout):
    """GETs `path` on a connection of its own; the status and the seconds it took."""
    host, port = address
    started = time.monotonic()
    try:
        connection = socket.create_connection(address, timeout=timeout)
        connection.sendall(("GET %s HTTP/1.1\r\nhost: %s:%d\r\nconnection: close\r\n\r\n"
                            % (path, host, port)).encode())
        answer = b""
        while True:
            chunk = connection.recv(65536)
            if not chunk:
                break
            answer += chunk
        connection.close()
    except OSError as error:
        return type(error).__name__, time.monotonic() - started, b""
    parts = answer.split(b" ", 2)
    status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else "no answer"
    return status, time.monotonic() - started, answer


def error_code(answer):
    """The `error.code` of a JSON answer, if it has one."""
    _, _, body = answer.partition(b"\r\n\r\n")
    try:
        return json.loads(body).get("error", {}).get("code")
    except (ValueError, AttributeError):
        return None


def held_connections(address, sources, seconds=30):
    """Attack 3: the latency of a new client's list page GETs while 2,000 connections that
    each sent one byte are held and renewed."""
    host, port = address
    holder = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "hold-connections", host, str(port),
         "2000", ",".join(sources), str(seconds + 10)],
        stdout=subprocess.PIPE, text=True)
    # The held connections are opened first.
    time.sleep(5)
    latencies, statuses = [], {}
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        status, latency, _ = get(address, "/v1/search?q=%E6%96%B0%E9%97%BB&limit=10", 65)
        statuses[str(status)] = statuses.get(str(status), 0) + 1
        latencies.append(latency)
        time.sleep(0.1)
    holder_report = json.loads(holder.communicate(timeout=120)[0] or "{}")
    return {
        "sources": sources or ["127.0.0.1"],
        "holder": holder_report,
        "gets": len(latencies),
        "statuses": statuses,
        "latency_ms_p50": round(1e3 * percentile(latencies, 0.5), 1),
        "latency_ms_p99": round(1e3 * percentile(latencies, 0.99), 1),
        "latency_ms_max": round(1e3 * max(latencies), 1),
    }


def stalled_uploads(address, documents, uploads, sent_bytes):
    """Attack 4: `uploads` uploads declare a 32 MiB body, send `sent_bytes` of it and stall;
    how long writes of a 1 MB batch are refused, and what /healthz says meanwhile."""
    host, port = address
    head = ("POST /v1/documents HTTP/1.1\r\nhost: %s:%d\r\ncontent-type: application/json\r\n"
            "content-length: %d\r\nconnection: close\r\n\r\n" % (host, port, 32 << 20)).encode()
    part = b" " * sent_bytes
    connections = []

    def upload():
        connection = socket.create_connection(address, timeout=120)
        connections.append(connection)
        try:
            connection.sendall(head + part)
        except OSError:
            pass  # refused before it was all sent

    senders = [threading.Thread(target=upload) for _ in range(uploads)]
    for sender in senders:
        sender.start()
    for sender in senders:
        sender.join()
    stalled = time.monotonic()
    answers = [None] * uploads

    def answer(number):
        connection = connections[number]
        connection.settimeout(120)
        answers[number] = (read_status(connection), time.monotonic() - stalled)

    readers = [threading.Thread(target=answer, args=(n,)) for n in range(uploads)]
    for reader in readers:
        reader.start()
    probe, _ = batch(documents, "probe", 1_000_000)
    refused, health = 0, {}
    held = None
    while time.monotonic() - stalled < 90:
        status, _, answer_bytes = get(address, "/healthz", 10)
        key = "%s %s" % (status, error_code(answer_bytes) or "")
        health[key.strip()] = health.get(key.strip(), 0) + 1
        status, _ = post(address, probe, timeout=60)
        if status == 200:
            held = time.monotonic() - stalled
            break
        refused += 1
        time.sleep(0.2)
    for reader in readers:
        reader.join()
    for connection in connections:
        connection.close()
    outcomes = {}
    for status, _ in answers:
        outcomes[str(status)] = outcomes.get(str(status), 0) + 1
    return {
        "uploads": uploads,
        "sent_mb_each": round(sent_bytes / 1e6, 1),
        "writes_refused_before_one_taken": refused,
        "write_queue_held_s": round(held, 2) if held is not None else "over 90 s",
        "healthz_meanwhile": health,
        "uploads_answered": outcomes,
        "uploads_answered_after_s": round(max(seconds for _, seconds in answers), 1),
    }


def start_server(binary, scratch, settings_text):
    """`serve` on a fresh index in `scratch` under `ulimit -n 1024`; the process and its
    (host, port)."""
    config = os.path.join(scratch, "settings.toml")
    with open(config, "w") as settings:
        settings.write(settings_text)
    server = subprocess.Popen(
        ["sh", "-c", 'ulimit -n 1024 && exec "$0" "$@"', binary, "serve",
         "--index", os.path.join(scratch, "index"), "--addr", "127.0.0.1:0",
         "--config", config],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = server.stdout.readline()
    host, port = line.strip().rsplit("/", 1)[-1].rsplit(":", 1)
    return server, (host, int(port))


def memory_rounds(binary, documents, queue_mib, writer_memory_mb, rounds=8, clients=16):
    """Attack 5: the peak RSS after each of `rounds` rounds of `clients` concurrent 10 MB
    POSTs, on a server of its own with these limits, against the stated bound."""
    scratch = tempfile.mkdtemp(prefix="td-reliability-memory-")
    server, address = start_server(
        binary, scratch,
        "[server]\nmax_batch_documents = 100000\nqueue_mib = %d\n[index]\nwriter_memory_mb = %d\n"
        % (queue_mib, writer_memory_mb))
    try:
        warm, _ = batch(documents, "warm", 200_000)
        post(address, warm)
        at_rest = rss_kib(server.pid, "VmRSS") / 1024
        # The 160 MiB is measured, not derived: what the heap holds beyond the two budgets
        # (merges, the forest's growth over the rounds' documents, allocator slack).
        bound = at_rest + queue_mib + writer_memory_mb + 160
        peaks, statuses = [], {}
        # VmHWM counts the pages of mapped files too (the index's and the forest's, which the
        # kernel drops under pressure): the heap's own peak (RssAnon) is sampled beside it.
        anon_peak = [0]
        sampling = threading.Event()

        def sample():
            while not sampling.wait(0.02):
                anon_peak[0] = max(anon_peak[0], rss_kib(server.pid, "RssAnon"))

        sampler = threading.Thread(target=sample)
        sampler.start()
        anon_peaks = []
        for number in range(rounds):
            bodies = [batch(documents, f"m{number}-{client}", 10_000_000)[0]
                      for client in range(clients)]

            def client(body):
                try:
                    status, _ = post(address, body)
                except OSError as error:
                    status = type(error).__name__
                statuses[str(status)] = statuses.get(str(status), 0) + 1

            threads = [threading.Thread(target=client, args=(body,)) for body in bodies]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            peaks.append(round(rss_kib(server.pid, "VmHWM") / 1024))
            anon_peaks.append(round(anon_peak[0] / 1024))
        sampling.set()
        sampler.join()
        return {
            "queue_mib": queue_mib,
            "writer_memory_mb": writer_memory_mb,
            "rounds": rounds,
            "posts_per_round": clients,
            "answers": statuses,
            "rss_at_rest_mib": round(at_rest),
            "peak_rss_mib_after_each_round": peaks,
            "peak_heap_mib_after_each_round": anon_peaks,
            "bound_mib": round(bound),
            "heap_within_bound": max(anon_peaks) <= bound,
        }
    finally:
        server.terminate()
        server.wait(timeout=60)


def get_json(address, path):
    status, _, answer = get(address, path, 30)
    _, _, body = answer.partition(b"\r\n\r\n")
    try:
        return status, json.loads(body)
    except ValueError:
        return status, None


def full_disk(binary, documents, run):
    """Attack 6, one run: the index on a tmpfs that another file fills."""
    scratch = tempfile.mkdtemp(prefix="td-reliability-disk-")
    disk = os.path.join(scratch, "disk")
    os.mkdir(disk)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=160m", "tmpfs", disk], check=True)
    server = None
    try:
        server, address = start_server(binary, disk, "[server]\nmax_batch_documents = 100000\n")
        acknowledged = 0
        for part in range(4):
            body = "".join(
                json.dumps(dict(document, id=f"d{run}-{part}-{n}"), ensure_ascii=False) + "\n"
                for n, document in enumerate(documents[part * 500:(part + 1) * 500]))
            status, _ = post(address, body.encode())
            acknowledged += 500 if status == 200 else 0
        filler = os.path.join(disk, "filler")
        with open(filler, "wb") as out:
            try:
                while True:
                    out.write(b"\7" * (1 << 20))
                    out.flush()
                    os.fsync(out.fileno())
            except OSError:
                pass
        statuses, health = {}, {}
        started = time.monotonic()
        number = 0
        while time.monotonic() - started < 20:
            body, _ = batch(documents[2000 + number * 100:], f"f{run}-{number}", 40_000)
            status, _ = post(address, body, timeout=30)
            statuses[str(status)] = statuses.get(str(status), 0) + 1
            if status == 200:
                acknowledged += body.count(b"\n")
            code, answer = get_json(address, "/healthz")
            key = "%s %s" % (code, ((answer or {}).get("error") or {}).get("code", ""))
            health[key.strip()] = health.get(key.strip(), 0) + 1
            number += 1
            time.sleep(0.2)
        lived = server.poll() is None
        server.terminate()
        server.wait(timeout=60)
        server, address = start_server(binary, disk, "[server]\nmax_batch_documents = 100000\n")
        restarted = get(address, "/v1/stats", 30)[0] == 200
        os.remove(filler)
        freed = time.monotonic()
        taken = healthy = None
        body, _ = batch(documents, f"after{run}", 40_000)
        while time.monotonic() - freed < 60 and (taken is None or healthy is None):
            if taken is None and post(address, body, timeout=30)[0] == 200:
                taken = time.monotonic() - freed
                acknowledged += body.count(b"\n")
            if taken is not None and get(address, "/healthz", 30)[0] == 200:
                healthy = time.monotonic() - freed
            time.sleep(0.1)
        _, stats = get_json(address, "/v1/stats")
        return {
            "writes_while_full": statuses,
            "healthz_while_full": health,
            "server_lived": lived,
            "restart_on_full_disk_listened": restarted,
            "write_taken_after_s": round(taken, 2) if taken is not None else "over 60 s",
            "healthz_ok_after_s": round(healthy, 2) if healthy is not None else "over 60 s",
            "acknowledged": acknowledged,
            "documents_in_index": ((stats or {}).get("index") or {}).get("documents"),
        }
    finally:
        if server is not None and server.poll() is None:
            server.terminate()
            server.wait(timeout=60)
        subprocess.run(["umount", disk], check=False)


def corpus_lines(path, limit):
    lines = []
    with gzip.open(path, "rt", encoding="utf-8") as corpus:
        for line in corpus:
            lines.append(json.loads(line))
            if len(lines) >= limit:
                break
    return lines


def batch(documents, prefix, target_bytes):
    """NDJSON of the corpus's documents under new ids, about `target_bytes` long."""
    out, size, n = [], 0, 0
    while size < target_bytes:
        document = dict(documents[n % len(documents)])
        document["id"] = f"{prefix}-{n}"
        document.pop("published_at", None)
        line = json.dumps(document, ensure_ascii=False) + "\n"
        out.append(line)
        size += len(line.encode())
        n += 1
    return "".join(out).encode(), n


def percentile(values, q):
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def one_server_attacks(binary, documents):
    """Attacks 1 to 4, on one server: what they measure, by name."""
    scratch = tempfile.mkdtemp(prefix="td-reliability-")
    server, address = start_server(binary, scratch,
                                   "[server]\nmax_batch_documents = 100000\n")
    host, port = address
    report = {"server_open_file_limit": 1024}
    try:
        # A warm-up batch, so that the dictionary and the writer are loaded.
        warm, _ = batch(documents, "warm", 200_000)
        post(address, warm)
        before = rss_kib(server.pid, "VmRSS")
        bodies = [batch(documents, f"c{client}", 24_000_000) for client in range(10)]
        answers = [None] * 10

        def client(number):
            answers[number] = post(address, bodies[number][0])

        threads = [threading.Thread(target=client, args=(n,)) for n in range(10)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        peak = rss_kib(server.pid, "VmHWM")
        report["memory"] = {
            "posts": 10,
            "body_mb": round(len(bodies[0][0]) / 1e6, 1),
            "documents_per_post": bodies[0][1],
            "statuses": sorted(str(status) for status, _ in answers),
            "rss_before_mib": round(before / 1024, 1),
            "peak_rss_mib": round(peak / 1024, 1),
            "peak_above_before_mib": round((peak - before) / 1024, 1),
            "queue_mib": 256,
        }
        bodies = None

        # Availability under held connections.
        idle = []
        for _ in range(2000):
            connection = socket.socket()
            connection.setblocking(True)
            try:
                connection.connect(address)
            except OSError:
                connection.close()
                break
            idle.append(connection)
        slow = []
        head = ("POST /v1/documents HTTP/1.1\r\nhost: %s:%d\r\ncontent-type: application/json\r\n"
                "content-length: %d\r\n\r\n" % (host, int(port), 32 << 20)).encode()
        for _ in range(16):
            try:
                connection = socket.create_connection(address, timeout=10)
                connection.sendall(head)
            except OSError:
                break
            slow.append(connection)
        stop = threading.Event()

        def trickle():
            while not stop.is_set():
                for connection in slow:
                    try:
                        connection.sendall(b" ")
                    except OSError:
                        pass
                stop.wait(1.0)

        trickler = threading.Thread(target=trickle)
        trickler.start()
        latencies, statuses = [], {}
        started = time.monotonic()
        n = 0
        while time.monotonic() - started < 20:
            body, _ = batch(documents[n % 1000:], f"w{n}", 1)
            try:
                status, latency = post(address, body, timeout=30)
            except OSError as error:
                status, latency = type(error).__name__, 30.0
            statuses[str(status)] = statuses.get(str(status), 0) + 1
            if status == 200:
                latencies.append(latency)
            n += 1
            time.sleep(0.1)
        stop.set()
        trickler.join()
        report["availability"] = {
            "idle_connections_opened": len(idle),
            "slow_uploads": len(slow),
            "writes": n,
            "statuses": statuses,
            "ok_share": round(statuses.get("200", 0) / max(n, 1), 4),
            "latency_ms_p50": round(1e3 * (percentile(latencies, 0.5) or 0), 1),
            "latency_ms_p99": round(1e3 * (percentile(latencies, 0.99) or 0), 1),
            "latency_ms_max": round(1e3 * (max(latencies) if latencies else 0), 1),
        }
        for connection in idle + slow:
            connection.close()

        report["held_connections"] = [
            held_connections(address, []),
            held_connections(address, ["127.0.0.%d" % n for n in range(10, 30)]),
        ]
        report["stalled_uploads"] = [
            stalled_uploads(address, documents, 2, 22_000_000),
            stalled_uploads(address, documents, 9, 29_500_000),
        ]
    finally:
        server.terminate()
        server.wait(timeout=60)
    return report


def main():
    if sys.argv[1:2] == ["hold-connections"]:
        host, port, count, sources, seconds = sys.argv[2:7]
        hold_connections(host, int(port), int(count), [s for s in sources.split(",") if s],
                         float(seconds))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpus")
    parser.add_argument("--binary", default="target/release/tantivy-dedup")
    parser.add_argument("--only", choices=["memory-rounds", "full-disk"],
                        help="run only this attack (5 or 6; each runs servers of its own)")
    args = parser.parse_args()
    if not os.path.isfile(args.corpus):
        sys.exit(
            f"reliability.py: {args.corpus}: no such file. The news corpus "
            "(xwlb-news.jsonl.gz, the project's evaluation data) is not shipped with the "
            "repository; README \"Evaluation data\" says where it comes from. Any JSON Lines "
            "file of articles with `id` and `content` works too.")
    if not os.path.isfile(args.binary):
        sys.exit(f"reliability.py: {args.binary}: no such file; build it with "
                 "`cargo build --release` or name it with --binary")
    # This process holds 2,000 connections.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))

    documents = corpus_lines(args.corpus, 20000)
    report = {}
    if args.only is None:
        report.update(one_server_attacks(args.binary, documents))
    if args.only in (None, "memory-rounds"):
        report["memory_rounds"] = [
            memory_rounds(args.binary, documents, 256, 256),
            memory_rounds(args.binary, documents, 64, 64),
        ]
    if args.only in (None, "full-disk"):
        if os.geteuid() == 0:
            report["full_disk"] = [full_disk(args.binary, documents, run) for run in range(3)]
        else:
            report["full_disk"] = "not run: mounting a tmpfs needs root"
    json.dump(report, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
