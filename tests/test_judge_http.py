"""The judge's HTTP transport (lm_eval_ext/judge/http.py): proxies from the environment, certificates, a caller with its
own event loop, and what is left running once the client is closed."""
from __future__ import annotations

import asyncio
import base64
import socket
import threading
from pathlib import Path

import certifi
import pytest

from lm_eval_ext.judge import judge_many
from lm_eval_ext.judge.client import CallBudget, JudgeClient, TransientError
from lm_eval_ext.judge.http import tls_context
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


def _client(tmp_path, url: str = JUDGE_URL) -> JudgeClient:
    return JudgeClient(config(url, tmp_path), stop=threading.Event(), budget=CallBudget(None))


@pytest.mark.parametrize("variable", ["HTTP_PROXY", "http_proxy", "ALL_PROXY"])
def test_the_proxy_of_the_environment_carries_the_calls(tmp_path, no_proxy_env, variable):
    with StubOpenAIServer(text="\\boxed{6}") as proxy:
        no_proxy_env.setenv(variable, f"http://user:secret@127.0.0.1:{proxy.port}")
        client = _client(tmp_path)
        assert client.complete({"model": "stub-judge", "messages": []}) == "\\boxed{6}"
        client.close()
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
    client = _client(tmp_path, "https://judge.invalid/v1")
    with pytest.raises(TransientError) as err:
        client.complete({"model": "stub-judge", "messages": []}, tries=1)
    client.close()
    thread.join(10)
    listener.close()
    [connect] = seen
    assert connect.startswith(b"CONNECT judge.invalid:443 HTTP/1.1\r\n") and err.value.kind == "connection"
    assert b"Proxy-Authorization: Basic " + base64.b64encode(b"user:secret") in connect
    assert FAKE_KEY.encode() not in connect


def test_no_proxy_skips_the_proxy(tmp_path, no_proxy_env):
    with StubOpenAIServer(text="\\boxed{6}") as proxy:
        no_proxy_env.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
        no_proxy_env.setenv("NO_PROXY", "localhost,.invalid")
        client = _client(tmp_path)
        with pytest.raises(TransientError) as err:
            client.complete({"model": "stub-judge", "messages": []}, tries=1)
        client.close()
        assert proxy.requests == []  # the call went straight to judge.invalid, which does not resolve
    assert err.value.kind == "connection" and "cannot connect to judge.invalid:8000" in str(err.value)


def test_a_caller_with_a_running_event_loop_is_judged_the_same(tmp_path, no_proxy_env):
    """As in a notebook: the judge's own loop runs in its own thread, not in the caller's."""
    with StubOpenAIServer(responder=score_by_index) as srv:
        async def caller():
            return judge_many(items(5), config(srv, tmp_path), progress=False)

        results = asyncio.run(caller())
    assert [r.score for r in results] == [1.0, 2.0, 3.0, 4.0, 5.0]


def test_closing_the_client_stops_its_thread(tmp_path, no_proxy_env):
    def loops() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t.name == "judge-http"}

    before = loops()
    with StubOpenAIServer(text="\\boxed{6}") as srv:
        client = _client(tmp_path, srv.base_url)
        client.complete({"model": "stub-judge", "messages": []})
        [started] = loops() - before  # one loop, started by the first call
        client.close()
    assert not started.is_alive()


def test_the_certificates_are_read_once_for_each_setting(tmp_path, monkeypatch):
    """Transports share one TLS context while SSL_CERT_FILE and SSL_CERT_DIR keep their values; a new value gets a
    context of its own, that trusts what the variable names."""
    for name in ("SSL_CERT_FILE", "SSL_CERT_DIR"):
        monkeypatch.delenv(name, raising=False)
    default = tls_context()
    assert tls_context() is default and len(default.get_ca_certs()) > 100  # certifi's bundle
    bundle = Path(certifi.where()).read_text(encoding="ascii")
    end = "-----END CERTIFICATE-----"
    one = tmp_path / "one.pem"
    one.write_text(bundle[:bundle.index(end) + len(end)] + "\n", encoding="ascii")
    monkeypatch.setenv("SSL_CERT_FILE", str(one))
    only_one = tls_context()
    assert only_one is not default and len(only_one.get_ca_certs()) == 1 and tls_context() is only_one
    monkeypatch.delenv("SSL_CERT_FILE")
    assert tls_context() is default
