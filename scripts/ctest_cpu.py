#!/usr/bin/python3
"""The CPU time of every CTest test of a build tree, heaviest first.

  scripts/ctest_cpu.py build/asan              every test, 4 at a time
  scripts/ctest_cpu.py build/tsan -j 2 -LE '^crash$'

For scripts/test.sh's time: its sanitizer stages are bound by the CPU their
tests use, not by how ctest packs them, and ctest reports only wall time.
This runs the tests ctest would run (`ctest --show-only=json-v1` with the
same -L/-LE/-R filters), each as ctest does (its command, working directory
and ENVIRONMENT property), N at a time, and prints per test the user + system
CPU time of its process and every child it waited for (demo servers, idemctl
runs), its wall time and its exit status. It ignores RUN_SERIAL: every test
runs beside the others (the Redis Cluster tests, which move slots of the
shared cluster, may then disturb the cluster's other tests; pass -LE or -R
to leave them out). The stores' servers (PostgreSQL,
Redis) are not counted: their CPU is theirs. Export what scripts/test.sh
exports first (IDEM_TEST_POSTGRES_URI and the Redis URIs, ASAN_OPTIONS,
CI=true) so that the tests run as they do there.

Standard library only.
"""

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build", help="a configured and built build tree")
    parser.add_argument("-j", "--jobs", type=int, default=4)
    parser.add_argument("-L", dest="label", help="ctest -L")
    parser.add_argument("-LE", dest="label_exclude", help="ctest -LE")
    parser.add_argument("-R", dest="regex", help="ctest -R")
    args = parser.parse_args()

    show = ["ctest", "--show-only=json-v1"]
    for flag, value in (("-L", args.label), ("-LE", args.label_exclude),
                        ("-R", args.regex)):
        if value:
            show += [flag, value]
    listing = subprocess.run(show, cwd=args.build, check=True,
                             capture_output=True, text=True).stdout
    tests = json.loads(listing)["tests"]

    rows = []
    lock = threading.Lock()

    def run(test):
        env = dict(os.environ)
        cwd = args.build
        for prop in test.get("properties", []):
            if prop["name"] == "WORKING_DIRECTORY":
                cwd = prop["value"]
            elif prop["name"] == "ENVIRONMENT":
                for pair in prop["value"]:
                    key, _, value = pair.partition("=")
                    env[key] = value
        start = time.monotonic()
        proc = subprocess.Popen(test["command"], cwd=cwd, env=env,
                                stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        # wait4: the rusage of the test and of the children it waited for.
        _, status, usage = os.wait4(proc.pid, 0)
        # Reaped here, not by Popen: tell it, so that it never waits again.
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - start
        with lock:
            rows.append((usage.ru_utime + usage.ru_stime, usage.ru_utime,
                         usage.ru_stime, wall,
                         proc.returncode, test["name"]))

    started = time.monotonic()
    with ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(run, tests))
    elapsed = time.monotonic() - started

    print(f"{'cpu s':>8} {'user':>8} {'sys':>8} {'wall s':>8} {'exit':>5}  test")
    for cpu, user, system, wall, code, name in sorted(rows, reverse=True):
        print(f"{cpu:8.2f} {user:8.2f} {system:8.2f} {wall:8.2f} {code:5d}  {name}")
    total_cpu = sum(row[0] for row in rows)
    failed = sum(1 for row in rows if row[4] != 0)
    print(f"{len(rows)} tests, {failed} failed: {total_cpu:.0f} s of CPU in "
          f"{elapsed:.0f} s at -j {args.jobs}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
