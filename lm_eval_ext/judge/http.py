"""The judge's HTTP transport: ``aiohttp`` on one event loop, in a thread of its own.

Every judge call of a run is a task on this loop (:meth:`Transport.submit`; the runner keeps
``concurrency`` of them in flight), and a caller that wants one reply waits for it from its own thread
(:meth:`Transport.run`). One thread drives every connection: the 32 calls of a run at concurrency 32 are
not 32 threads taking turns at the interpreter lock, and ``aiohttp`` parses HTTP in C. The loop lives
in its own thread so that the judge works the same from any caller, one with an event loop of its own
(a notebook) included.

What the transport keeps from the ``httpx`` client it replaces:

- **proxies** from the environment (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``, ``NO_PROXY``, in
  either case), as ``httpx`` and the ``openai`` client read them; the judge talks to one host, so the
  proxy is chosen once, not looked up again (in a thread) for every request as ``aiohttp``'s
  ``trust_env`` would;
- **certificates**: ``httpx``'s TLS context (``certifi``, or ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``), made once
  per process for each value of those two variables (:func:`tls_context`);
- **kept-alive connections**, as many as requests in flight (the judge's ``concurrency``).

:meth:`Transport.fetch` bounds a request by a deadline over the whole call and by a size cap on the
reply (read in pieces as it arrives); a request cut or failed raises :class:`Cut`.
"""
from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import functools
import os
import ssl
import threading
import time
import urllib.parse
import urllib.request
import weakref
from collections.abc import Mapping

import aiohttp
import httpx


class Cut(Exception):
    """A request that brought no whole reply: ``kind`` is ``timeout``, ``too_large`` or ``connection``;
    ``received`` the reply's bytes read before the cut (None: no reply had begun)."""

    def __init__(self, kind: str, detail: str = "", received: int | None = None) -> None:
        super().__init__(detail or kind)
        self.kind = kind
        self.received = received


def env_proxy(url: str) -> tuple[str | None, str | None]:
    """The proxy the environment sets for ``url`` (None if none or if ``NO_PROXY`` covers its host), and the
    ``Proxy-Authorization`` value of the credentials in the proxy's URL, if any."""
    target = urllib.parse.urlsplit(url)
    if urllib.request.proxy_bypass_environment(target.netloc.rpartition("@")[2]):
        return None, None
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(target.scheme) or proxies.get("all")
    if not proxy:
        return None, None
    parts = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    if parts.username is None:
        return parts.geturl(), None
    credentials = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
    bare = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
    return bare, "Basic " + base64.b64encode(credentials.encode()).decode()


def tls_context() -> ssl.SSLContext:
    """``httpx.create_ssl_context()`` for the current ``SSL_CERT_FILE`` and ``SSL_CERT_DIR``, shared by the judge's
    transports: reading the certificates takes about 40 ms, which a run would otherwise pay for each of them (the
    judge's probe, each judged task)."""
    return _tls_context(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


@functools.lru_cache(maxsize=None)
def _tls_context(cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    # the two variables key the cache; httpx reads them itself
    return httpx.create_ssl_context()


class Transport:
    """HTTP requests to one judge endpoint, from any thread; the loop and its thread start on the first."""

    def __init__(self, base_url: str, headers: Mapping[str, str], connections: int) -> None:
        # The headers go with each request, not as the session's defaults: aiohttp also sends a session's
        # defaults to the proxy, its Authorization (the API key) as Proxy-Authorization.
        self._headers = dict(headers)
        self._connections = connections
        self._proxy, proxy_login = env_proxy(base_url)
        self._proxy_headers = None
        if proxy_login and base_url.startswith("https:"):  # said in the CONNECT that opens the tunnel
            self._proxy_headers = {"Proxy-Authorization": proxy_login}
        elif proxy_login:  # said in every request, which the proxy forwards
            self._headers["Proxy-Authorization"] = proxy_login
        self._post_headers = {**self._headers, "Content-Type": "application/json"}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._session: aiohttp.ClientSession | None = None
        self._closer: weakref.finalize | None = None
        self._lock = threading.Lock()

    def _start(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="judge-http", daemon=True)
                thread.start()
                session = asyncio.run_coroutine_threadsafe(self._open(), loop).result()
                self._loop, self._session = loop, session
                # closed by close(), or when this transport is dropped or the interpreter exits
                self._closer = weakref.finalize(self, _shut, loop, thread, session)
            return self._loop

    async def _open(self) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(limit=self._connections, ssl=tls_context())
        return aiohttp.ClientSession(connector=connector, trust_env=False)

    def submit(self, call) -> concurrent.futures.Future:
        """Run the coroutine ``call`` on the loop (started if need be); its result as a future, for any thread."""
        return asyncio.run_coroutine_threadsafe(call, self._start())

    def run(self, call):
        """Run the coroutine ``call`` on the loop and wait for its result (blocks the calling thread)."""
        return self.submit(call).result()

    async def fetch(self, method: str, url: str, body: bytes | None, timeout: float, cap: int
                    ) -> tuple[int, Mapping[str, str], bytes]:
        """Status, headers and body of one request, which must end within ``timeout`` s with at most ``cap``
        bytes of reply; raises :class:`Cut` otherwise. Awaited on the loop (:meth:`run`, :meth:`submit`)."""
        # the deadline is over the whole call: aiohttp's `total` bounds connecting, sending and each wait for
        # data, and the body's pieces are checked against it, so a reply that keeps coming is cut too
        deadline = time.monotonic() + timeout
        data = None
        headers = self._post_headers if body is not None else self._headers
        try:
            # redirects are not followed: the key goes to the configured endpoint only, a 3xx is its answer
            async with self._session.request(method, url, data=body, headers=headers, allow_redirects=False,
                                             proxy=self._proxy, proxy_headers=self._proxy_headers,
                                             timeout=aiohttp.ClientTimeout(total=timeout)) as response:
                data = bytearray()
                async for chunk in response.content.iter_any():
                    data += chunk
                    if len(data) > cap:
                        response.close()  # hang up: the rest of the reply is not read
                        raise Cut("too_large", received=len(data))
                    if time.monotonic() > deadline:
                        response.close()
                        raise Cut("timeout", received=len(data))
                return response.status, response.headers, bytes(data)
        except asyncio.TimeoutError:
            raise Cut("timeout", received=len(data) if data else None) from None
        except aiohttp.ClientError as exc:  # refused, reset, dropped mid-reply, a broken HTTP response
            raise Cut("connection", str(exc) or type(exc).__name__) from None

    def close(self) -> None:
        """Close the connections and stop the loop; calls still in flight are cancelled."""
        with self._lock:
            self._loop = None
            closer, self._closer = self._closer, None
        if closer is not None:
            closer()


def _shut(loop: asyncio.AbstractEventLoop, thread: threading.Thread, session: aiohttp.ClientSession) -> None:
    """End the calls in flight (e.g. after Ctrl-C, when the workers are not waited for), close the session,
    stop the loop and its thread."""
    async def shut() -> None:
        current = asyncio.current_task()
        in_flight = [task for task in asyncio.all_tasks() if task is not current]
        for task in in_flight:
            task.cancel()
        await asyncio.gather(*in_flight, return_exceptions=True)
        await session.close()

    if threading.current_thread() is thread:  # dropped by a collection that ran on the loop's own thread
        loop.create_task(shut()).add_done_callback(lambda _: loop.stop())
        return
    asyncio.run_coroutine_threadsafe(shut(), loop).result()
    loop.call_soon_threadsafe(loop.stop)
    thread.join()
    loop.close()
