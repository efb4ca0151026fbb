"""Loads list pages of a running `tantivy-dedup serve` from concurrent clients and prints, for
each page, its latency at the median and the 99th percentile and the pages answered a second:
how one order of a list page compares with another on the same index in the same run.

usage:
  list_load.py [--base URL] [--clients N] [--requests N] QUERY [QUERY ...]

QUERY is the query string of `/v1/search` (`sort=newest&limit=20`). Each is asked 20 times
to warm up, then --requests times (default 400) from --clients threads (default 32). Example,
on the CCTV corpus served at 127.0.0.1:7700:

  list_load.py 'sort=similar_desc&limit=20' 'sort=newest&limit=20' 'sort=published_at:desc&limit=20'
"""

import argparse
import concurrent.futures
import statistics
import time
import urllib.request


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="http://127.0.0.1:7700")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("queries", nargs="+", metavar="QUERY")
    args = parser.parse_args()

    def one(query):
        start = time.perf_counter()
        with urllib.request.urlopen(f"{args.base}/v1/search?{query}") as answer:
            answer.read()
        return (time.perf_counter() - start) * 1000

    for query in args.queries:
        for _ in range(20):
            one(query)
        with concurrent.futures.ThreadPoolExecutor(args.clients) as pool:
            start = time.perf_counter()
            latencies = sorted(pool.map(one, [query] * args.requests))
            elapsed = time.perf_counter() - start
        p99 = latencies[max(0, int(len(latencies) * 0.99) - 1)]
        print(
            f"{query:50} p50 {statistics.median(latencies):6.1f} ms  p99 {p99:6.1f} ms  "
            f"{args.requests / elapsed:6.0f} pages/s"
        )


if __name__ == "__main__":
    try:
        main()
    except (BrokenPipeError, KeyboardInterrupt):
        pass
