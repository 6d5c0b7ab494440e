"""Judge throughput: wall time and client CPU of judging N responses against the local OpenAI-compatible stub.

The stub (doubles.stub_openai) answers every call after DELAY seconds plus up to
JITTER more (uniform); the judge's real HTTP client (the openai client on the judge's event loop), its retries
and the on-disk cache are all in the path. By default the stub runs in its own process (``--stub process``),
so the CPU time measured here is the client's alone; ``--stub thread`` runs it in this process, as
the tests do (its HTTP handling then competes with the client for the interpreter).

The stub fails 10% of the requests (``--faults``; the default preset ``mixed``: HTTP 429 with a 50 ms Retry-After,
HTTP 500, HTTP 503, a chat completion cut off mid-body, an empty body, a reply with no score and one with a score
out of range, 1/7 of the 10% each; the preset ``server``: 4% HTTP 500, 3% HTTP 429, 3% dropped connections).

For each concurrency: wall time; the ideal, N x the mean latency / concurrency (every worker busy
all the time, the client taking no time, no fault); when 99% of the stub's completions had been sent
(seconds from the first request: a wall time well above it is a few late items, e.g. waiting their retry
backoff); the client's CPU time per call; the most requests the stub saw at once; the faults it drew;
items lost (left without a verdict); items duplicated (a request the stub answered, i.e. would have been
paid, more than once); and a rerun, which the cache answers without a call. ``--profile FILE`` writes a
cProfile of the first case (the CPU time of every thread) and prints its top functions. ``--tail N`` (with
``--stub thread``) lists the N items answered last, each with its requests' arrival (seconds from the first) and
fault: what made the end of the run late.

``--client openai`` or ``--client httpx2`` sends the judge's first asks of the same items through the bare
``openai.AsyncOpenAI`` client (``post`` of the request body, as the judge sends it) or the bare ``httpx2``
client instead of the judge, ``concurrency`` at a time over as many kept-alive connections, without faults,
retries or cache: the CPU per call of the layers the judge is built on.

    python bench/judge_throughput.py [--items 2000] [--delay 0.05] [--jitter 0] [--concurrency 32]
    python bench/judge_throughput.py --items 600 --delay 0.5 --jitter 1.5 --concurrency 8 32 64 128 256
    python bench/judge_throughput.py --faults '' --client httpx2
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import json
import os
import pstats
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

TESTS = str(Path(__file__).resolve().parents[1] / "tests")  # the test doubles: tests/doubles
sys.path.insert(0, TESTS)

REPLY = "Feedback. \\boxed{7}"
# 10% of requests fail. mixed: the ways a loaded API and a judge model fail (rate limits with Retry-After, server
# errors, a broken or empty body, a reply without a valid score); server: server errors and dropped connections
_SEVENTH = 0.1 / 7
PRESETS = {
    "mixed": ",".join(f"{kind}={_SEVENTH:.6f}" for kind in ("429", "500", "503", "badjson", "empty", "noscore",
                                                            "outofrange")),
    "server": "500=0.04,429=0.03,drop=0.03",
}


@contextlib.contextmanager
def stub_in_process(delay: float, jitter: float, faults: str):
    """The stub in a child process: yields (base_url, stats); stats is its summary, filled when it stops."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [TESTS, os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen([sys.executable, "-m", "doubles.stub_openai", "--delay", str(delay),
                             "--jitter", str(jitter), "--text", REPLY, "--faults", faults],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    stats: dict = {}
    try:
        yield proc.stdout.readline().strip(), stats
    finally:
        proc.stdin.close()
        stats.update(json.loads(proc.stdout.readline()))
        proc.wait(30)


@contextlib.contextmanager
def stub_in_thread(delay: float, jitter: float, faults: str):
    """The stub in this process (as in the tests)."""
    from doubles.stub_openai import StubOpenAIServer

    stats: dict = {}
    with StubOpenAIServer(text=REPLY, delay_s=delay, jitter_s=jitter, faults=parse_faults(faults)) as srv:
        try:
            yield srv.base_url, stats
        finally:
            stats.update(srv.summary(), requests=list(srv.requests))


def parse_faults(text: str) -> dict[str, float]:
    """``"500=0.04,429=0.03"`` -> ``{"500": 0.04, "429": 0.03}``."""
    return {kind: float(p) for kind, p in (part.split("=", 1) for part in text.split(",") if part)}


def print_tail(requests: list[dict], count: int) -> None:
    """The ``count`` items answered last, each with its requests' arrival and fault (the stub's request log)."""
    posts = [r for r in requests if r["method"] == "POST"]
    tries: dict[int, list[tuple[float, str]]] = {}
    for request in posts:
        item = int(re.search(r"question (\d+)\?", json.dumps(request["body"]["messages"])).group(1))
        tries.setdefault(item, []).append((request["received"] - posts[0]["received"], request["fault"] or "answered"))
    print(f"the {count} items answered last (each request: arrival s, fault):")
    for item in sorted(tries, key=lambda i: tries[i][-1][0], reverse=True)[:count]:
        print(f"  item {item}: " + ", ".join(f"{at:.2f} {what}" for at, what in tries[item]))


def profiled(run, path: str):
    """Run ``run()`` with cProfile on every thread, timing each thread's CPU (waits for the network, a lock or
    the interpreter are not counted); save the profile to ``path`` and print the top."""
    profilers = []
    lock = threading.Lock()

    def thread_hook(*_):
        # the first event of a new thread: give it its own profiler, then stop hooking it
        profiler = cProfile.Profile(time.thread_time)
        with lock:
            profilers.append(profiler)
        sys.setprofile(None)
        profiler.enable()

    main = cProfile.Profile(time.thread_time)
    threading.setprofile(thread_hook)
    main.enable()
    try:
        return run()
    finally:
        main.disable()
        threading.setprofile(None)
        for profiler in profilers:
            profiler.disable()
        stats = pstats.Stats(main)
        for profiler in profilers:
            stats.add(profiler)
        stats.dump_stats(path)
        stats.sort_stats("tottime").print_stats(25)


async def bare(client: str, base_url: str, requests: list[dict], concurrency: int) -> list[dict]:
    """The replies (parsed JSON) to ``requests`` through the bare ``openai`` or ``httpx2`` client."""
    import httpx2
    import openai

    limits = httpx2.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    headers = {"Authorization": f"Bearer {os.environ['LMX_BENCH_KEY']}", "Accept-Encoding": "identity"}
    gate = asyncio.Semaphore(concurrency)
    if client == "openai":
        sender = openai.AsyncOpenAI(api_key=os.environ["LMX_BENCH_KEY"], base_url=base_url,
                                    default_headers={"Accept-Encoding": "identity"},
                                    http_client=openai.DefaultAsyncHttpxClient(limits=limits))

        async def send(request: dict) -> bytes:
            response = await sender.post("chat/completions", cast_to=httpx2.Response, body=request, stream=True)
            try:
                return await response.aread()
            finally:
                await response.aclose()
    else:
        sender = httpx2.AsyncClient(base_url=base_url + "/", headers=headers, limits=limits)

        async def send(request: dict) -> bytes:
            return (await sender.post("chat/completions", json=request)).content

    async def one(request: dict) -> dict:
        async with gate:
            return json.loads(await send(request))

    try:
        return await asyncio.gather(*(one(request) for request in requests))
    finally:
        await sender.close() if client == "openai" else await sender.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--delay", type=float, default=0.05, help="seconds per call at the stub")
    parser.add_argument("--jitter", type=float, default=0.0, help="up to this many more seconds per call")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[32])
    parser.add_argument("--faults", default="mixed", metavar="PRESET|KIND=P,...",
                        help=f"faults the stub draws per request: a preset ({', '.join(PRESETS)}; default: mixed, "
                        "10%%), KIND=P,... or '' for none")
    parser.add_argument("--stub", choices=("process", "thread"), default="process")
    parser.add_argument("--client", choices=("judge", "openai", "httpx2"), default="judge",
                        help="what sends the requests: the judge, or a bare client (with --faults '')")
    parser.add_argument("--no-cache", action="store_true", help="judge without the on-disk cache")
    parser.add_argument("--profile", metavar="FILE", help="cProfile the first case into FILE")
    parser.add_argument("--tail", type=int, metavar="N", help="with --stub thread: list the N items answered last")
    args = parser.parse_args()
    args.faults = PRESETS.get(args.faults, args.faults)
    if args.client != "judge" and args.faults:
        parser.error(f"--client {args.client} sends each request once, without retries: add --faults ''")
    if args.tail and args.stub != "thread":
        parser.error("--tail reads the stub's request log, which a stub in its own process does not keep: add "
                     "--stub thread")

    from lm_eval_ext.judge import Judge, JudgeItem, judge_many, resolve_config

    os.environ.setdefault("LMX_BENCH_KEY", "sk-bench")
    stub = stub_in_process if args.stub == "process" else stub_in_thread
    work = Path(tempfile.mkdtemp(prefix="judge-bench-"))
    n = args.items
    items = [JudgeItem(f"question {i}?", f"response {i} " + "words " * 200, f"reference {i}") for i in range(n)]
    mean_latency = args.delay + args.jitter / 2
    try:
        print(f"{n} items; stub ({args.stub}) latency {args.delay * 1000:.0f} ms"
              + (f" + up to {args.jitter * 1000:.0f} ms" if args.jitter else "")
              + f"; faults {args.faults or 'none'}; cache {'off' if args.no_cache else 'on'}; {os.cpu_count()} CPUs")
        print(f"{'conc.':>5}  {'wall s':>7}  {'ideal s':>7}  {'x ideal':>7}  {'99% by s':>8}  {'calls/s':>7}  "
              f"{'client CPU ms/call':>18}  "
              f"{'max in flight':>13}  {'faults':>6}  {'lost':>4}  {'no score':>8}  {'duplicated':>10}  {'rerun s':>7}")
        for index, concurrency in enumerate(args.concurrency):
            cache = "none" if args.no_cache else str(work / f"cache-{concurrency}.sqlite")
            with stub(args.delay, args.jitter, args.faults) as (base_url, stub_stats):
                config = resolve_config(explicit={
                    "base_url": base_url, "api_key_env": "LMX_BENCH_KEY", "model": "stub",
                    "concurrency": concurrency, "cache": cache})

                if args.client == "judge":
                    def run():
                        return judge_many(items, config, progress=False)
                else:
                    judge = Judge(config, progress=False)
                    requests = [judge.request(judge.messages(item), 0) for item in items]
                    judge.close()

                    def run():
                        return asyncio.run(bare(args.client, base_url, requests, concurrency))

                cpu, started = time.process_time(), time.perf_counter()
                results = profiled(run, args.profile) if args.profile and index == 0 else run()
                wall, cpu = time.perf_counter() - started, time.process_time() - cpu
                started = time.perf_counter()
                if args.client == "judge" and not args.no_cache:
                    judge_many(items, config, progress=False)
                rerun = time.perf_counter() - started
            if args.client == "judge":
                assert all(r.score == 7.0 for r in results if r.scored)
                # lost: items left without a verdict (an item whose every ask got a reply without a valid score is
                # the judge's verdict, "no score"); duplicated: requests the stub answered (would have been paid)
                # more than once, over both runs: a rerun that called the judge would duplicate every item
                unscored = sum(r.failure == "unparseable" for r in results)
                lost = sum(not r.scored for r in results) - unscored
            else:
                unscored, lost = 0, sum(reply["choices"][0]["message"]["content"] != REPLY for reply in results)
            faults = sum(stub_stats["faults"].values())
            ideal = n * mean_latency / concurrency
            print(f"{concurrency:>5}  {wall:>7.2f}  {ideal:>7.2f}  {wall / ideal:>7.2f}  "
                  f"{stub_stats['answered_by']['99%']:>8.2f}  {n / wall:>7.0f}  "
                  f"{cpu / n * 1000:>18.2f}  {stub_stats['max_in_flight']:>13}  {faults:>6}  {lost:>4}  {unscored:>8}  "
                  f"{stub_stats['paid_twice']:>10}  "
                  + (f"{rerun:>7.2f}" if args.client == "judge" and not args.no_cache else f"{'-':>7}"))
            if args.tail:
                print_tail(stub_stats["requests"], args.tail)
        print("rerun: python bench/judge_throughput.py " + " ".join(sys.argv[1:]))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
