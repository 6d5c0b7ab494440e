"""The judge's HTTP client (the openai client's, lm_eval_ext/judge/client.py): proxies from the environment, a caller
with its own event loop, and what is left running once judging ends."""
from __future__ import annotations

import asyncio
import base64
import socket
import threading

import pytest
from tqdm import tqdm

from lm_eval_ext.judge import judge_many
from lm_eval_ext.judge.client import CallBudget, JudgeClient, run
from doubles.stub_openai import StubOpenAIServer
from helpers.judge import FAKE_KEY, KEY_ENV, config, items, score_by_index

# a host that cannot be resolved (RFC 6761): a request reaches the stub only through the proxy
JUDGE_URL = "http://judge.invalid:8000/v1"
PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
                   "NO_PROXY")


@pytest.fixture
def no_proxy_env(monkeypatch):
    """The judge's key set, and no proxy variable but those a test sets."""
    monkeypatch.setenv(KEY_ENV, FAKE_KEY)
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def _complete(tmp_path, url: str = JUDGE_URL, **options):
    """One request through a new judge client: the reply, or the exception it raised."""
    client = JudgeClient(config(url, tmp_path), budget=CallBudget(None))

    async def call():
        try:
            return await client.complete({"model": "stub-judge", "messages": []}, **options)
        except Exception as exc:  # handed to the test
            return exc
        finally:
            await client.close()

    return run(call())


@pytest.mark.parametrize("variable", ["HTTP_PROXY", "http_proxy", "ALL_PROXY"])
def test_the_proxy_of_the_environment_carries_the_calls(tmp_path, no_proxy_env, variable):
    with StubOpenAIServer(text="\\boxed{6}") as proxy:
        no_proxy_env.setenv(variable, f"http://user:secret@127.0.0.1:{proxy.port}")
        assert _complete(tmp_path) == "\\boxed{6}"
        [request] = proxy.requests
    # a forward proxy gets the whole URL, and the proxy's credentials in their own header
    assert request["path"] == "http://judge.invalid:8000/v1/chat/completions"
    assert request["headers"]["proxy-authorization"] == "Basic " + base64.b64encode(b"user:secret").decode()


def test_an_https_judge_behind_a_proxy_gets_a_tunnel_and_the_proxy_never_sees_the_key(tmp_path, no_proxy_env):
    """The CONNECT that opens the tunnel carries the proxy's credentials, not the judge's key."""
    listener = socket.create_server(("127.0.0.1", 0))
    seen: list[bytes] = []

    def proxy() -> None:  # reads the CONNECT, refuses it
        conn, _ = listener.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(4096)
            seen.append(data)
            conn.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")

    thread = threading.Thread(target=proxy, daemon=True)
    thread.start()
    no_proxy_env.setenv("HTTPS_PROXY", f"http://user:secret@127.0.0.1:{listener.getsockname()[1]}")
    err = _complete(tmp_path, "https://judge.invalid/v1", tries=1)
    thread.join(10)
    listener.close()
    [connect] = seen
    assert connect.startswith(b"CONNECT judge.invalid:443 HTTP/1.1\r\n") and err.kind == "connection"
    assert b"Proxy-Authorization: Basic " + base64.b64encode(b"user:secret") in connect
    assert FAKE_KEY.encode() not in connect


def test_no_proxy_skips_the_proxy(tmp_path, no_proxy_env):
    with StubOpenAIServer(text="\\boxed{6}") as proxy:
        no_proxy_env.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
        no_proxy_env.setenv("NO_PROXY", "localhost,.invalid")
        err = _complete(tmp_path, tries=1)
        assert proxy.requests == []  # the call went straight to judge.invalid, which does not resolve
    assert err.kind == "connection" and "cannot connect to judge.invalid:8000" in str(err)


def test_a_caller_with_a_running_event_loop_is_judged_the_same_and_nothing_is_left_running(tmp_path, no_proxy_env):
    """As in a notebook: the judge's event loop runs in a thread of its own, not in the caller's, and ends with the
    judging."""
    before = set(threading.enumerate())
    with StubOpenAIServer(responder=score_by_index) as srv:
        async def caller():
            return judge_many(items(5), config(srv, tmp_path), progress=False)

        results = asyncio.run(caller())
        # The stub's request threads end once the judge has closed its connections: on a busy machine a moment
        # after judging returns (the threading docs name a thread "Thread-N (target)").
        for thread in set(threading.enumerate()) - before:
            if thread.name.endswith("(process_request_thread)"):
                thread.join(timeout=10)
        # What stays: the stub's serving thread, and tqdm's one monitor thread of the process, which its first bar
        # starts (a disabled one too) when no earlier test has
        assert set(threading.enumerate()) - before - {tqdm.monitor} == {srv._thread}
    assert [r.score for r in results] == [1.0, 2.0, 3.0, 4.0, 5.0]
