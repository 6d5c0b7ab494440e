"""Tests of the data layer (lm_eval_ext.data): registry, resolution, downloads, archives, Spider, CLI.

Downloads go to a local http.server on 127.0.0.1 through LM_EVAL_EXT_DOWNLOAD_BASE (no network);
download tests serve made-up files registered in a temporary manifest, so they need no mirror.
Tests that read the real datasets take the ``mirror`` fixture (LM_EVAL_EXT_DATA_DIR).
"""
from __future__ import annotations

import argparse
import hashlib
import io
import json
import shutil
import socket
import subprocess
import sys
import threading
import zipfile
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from lm_eval_ext.commands.data import add_data_parser
from lm_eval_ext.data import (
    DATASETS,
    DataError,
    pinned_file,
    read_zip_member,
    resolve,
    resolve_file,
    spider_database_dir,
    spider_database_path,
)
from lm_eval_ext.data import download as download_module
from lm_eval_ext.data import registry
from lm_eval_ext.data.archives import read_members_by_suffix
from lm_eval_ext.data.registry import MANIFEST_PATH, dataset_files

ENV_VARS = ("LM_EVAL_EXT_DATA_DIR", "LM_EVAL_EXT_CACHE_DIR", "LM_EVAL_EXT_SPIDER_DIR", "LM_EVAL_EXT_OFFLINE",
            "LM_EVAL_EXT_DOWNLOAD_BASE", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
LIEDER_BASE = "stimuli/base/base_stimuli.jsonl"
ELITR_QA_DEV = "data/elitr-bench-qa_dev.json"
TRANSCRIPT = "ELITR-minuting-corpus/elitr-minuting-corpus-en/dev/meeting_en_dev_001/transcript_MAN_annot02.txt"
ATTEMPTS = download_module.RETRIES + 1


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    """No inherited settings; the cache is a fresh tmp dir."""
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LM_EVAL_EXT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def mirror(data_dir, monkeypatch) -> Path:
    """The real read-only mirror, as LM_EVAL_EXT_DATA_DIR (clean_env removed it)."""
    monkeypatch.setenv("LM_EVAL_EXT_DATA_DIR", str(data_dir))
    return data_dir


@pytest.fixture
def registered(tmp_path, monkeypatch):
    """``register({path: content})``: a manifest whose dataset ``lieder`` is just these files.

    Returns the PinnedFiles by path; their URLs are on a host that cannot resolve, so only the
    local server (LM_EVAL_EXT_DOWNLOAD_BASE) can serve them.
    """
    def register(files: dict[str, bytes]) -> dict:
        datasets = {name: {"url_base": f"https://files.invalid/{name}/", "files": []} for name in DATASETS}
        datasets["lieder"]["files"] = [{"path": path, "sha256": hashlib.sha256(content).hexdigest(),
                                        "size": len(content)} for path, content in files.items()]
        manifest = tmp_path / "manifest.json"
        manifest.write_text(json.dumps({"format": 1, "datasets": datasets}))
        monkeypatch.setattr(registry, "MANIFEST_PATH", manifest)
        registry._registry.cache_clear()
        return {path: pinned_file("lieder", path) for path in files}

    yield register
    registry._registry.cache_clear()  # the packaged manifest again (MANIFEST_PATH is restored next)


class _Server:
    """A local HTTP server laid out as <root>/<host>/<path>, counting requests; it can drop connections."""

    def __init__(self, root: Path):
        self.root = root
        self.requests: list[str] = []
        self.drops: dict[str, list] = {}  # request path -> [drops left, send Content-Length]
        server = self

        class Handler(SimpleHTTPRequestHandler):
            def do_GET(self):
                server.requests.append(self.path)
                drop = server.drops.get(self.path)
                if drop and drop[0] > 0:
                    drop[0] -= 1
                    self._send_half(with_length=drop[1])
                else:
                    super().do_GET()

            def _send_half(self, with_length: bool):
                """Announce the whole file, send half of it, close the connection."""
                body = Path(self.translate_path(self.path)).read_bytes()
                self.send_response(200)
                if with_length:
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body[: len(body) // 2])
                self.wfile.flush()
                self.close_connection = True

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), partial(Handler, directory=str(root)))
        self.httpd.timeout = 5
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        # Bounded: stops itself even if a test forgets to.
        self.watchdog = threading.Timer(120, self.httpd.shutdown)

    @staticmethod
    def path_of(url: str) -> str:
        """The request path the canonical ``url`` is mapped to."""
        parts = urlsplit(url)
        return f"/{parts.netloc}{parts.path}"

    def put(self, url: str, content: bytes) -> None:
        """Serve ``content`` where the canonical ``url`` is mapped to."""
        target = self.root / self.path_of(url).lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)

    def drop(self, url: str, times: int, with_length: bool = True) -> None:
        """The next ``times`` requests for ``url`` get half the body, then the connection closes."""
        self.drops[self.path_of(url)] = [times, with_length]

    def count(self, url: str) -> int:
        """How many requests asked for ``url``."""
        return self.requests.count(self.path_of(url))


@pytest.fixture
def server(tmp_path, monkeypatch):
    srv = _Server(tmp_path / "www")
    srv.root.mkdir()
    srv.thread.start()
    srv.watchdog.start()
    monkeypatch.setenv("LM_EVAL_EXT_DOWNLOAD_BASE", srv.base)
    yield srv
    srv.watchdog.cancel()
    srv.httpd.shutdown()
    srv.httpd.server_close()
    srv.thread.join(5)


def _files(directory: Path) -> set[str]:
    """Every file under ``directory`` (temporary ones included), relative, as posix paths."""
    return {p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file()} if directory.exists() else set()


def _cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="lm-eval-ext")
    add_data_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["data", *argv])
    return args.func(args)


# --- registry -------------------------------------------------------------------------------------

def test_registry_covers_the_datasets_and_pins_sources():
    raw = json.loads(MANIFEST_PATH.read_text())
    assert tuple(raw["datasets"]) == DATASETS
    assert MANIFEST_PATH.stat().st_size < 1 << 20
    base = pinned_file("lieder", LIEDER_BASE)
    assert base.url == ("https://raw.githubusercontent.com/xiaomeng-zhu/LIEDER/"
                        "ab5f161feb0b15fd94dbd68e52497ccc033b52b6/stimuli/base/base_stimuli.jsonl")
    kv300 = pinned_file("lost_in_the_middle", "kv_retrieval_data/kv-retrieval-300_keys.jsonl.gz")
    assert (kv300.size, kv300.sha256[:8]) == (6641428, "47c795fe")
    litm = [s.path for s in dataset_files("lost_in_the_middle")]
    assert sum("_total_documents_gold_at_" in p and p.startswith("qa_data/") for p in litm) == 15
    assert pinned_file("spider", "tables.json").url.startswith(
        "https://raw.githubusercontent.com/McGill-NLP/MAGNIFICo/32b4a7ceeb84ca4f22e43d4fc3b8a9426a7a3a5e/spider/")
    assert pinned_file("magnifico", "magnifico_data/average/baseline/test.tsv").url.endswith(
        "/32b4a7ceeb84ca4f22e43d4fc3b8a9426a7a3a5e/magnifico_data/average/baseline/test.tsv")
    assert pinned_file("magnifico", "interpretations.json").url is None
    partial_release = [s for s in litm if s.startswith("partial_first_release_2023/")]
    assert pinned_file("lost_in_the_middle", partial_release[0]).url.startswith(
        "https://raw.githubusercontent.com/ViktorTorp/lost-in-the-middle/")
    transcripts = [s for s in dataset_files("elitr_bench") if s.archive_url]
    assert len(transcripts) == 18
    assert all(s.member.startswith("elitr-minuting-corpus-en/") and s.url is None for s in transcripts)
    assert not any(s.path.startswith("database/") for s in dataset_files("spider"))
    assert all(s.url or s.archive_url or s.note for name in DATASETS for s in dataset_files(name))


def test_unknown_dataset_and_file_are_data_errors():
    with pytest.raises(DataError, match="Known datasets"):
        resolve_file("nope", "x")
    with pytest.raises(DataError, match="Did you mean"):
        resolve_file("lieder", "stimuli/base/base_stimuli.json")


def test_manifest_generator_reproduces_packaged_manifest(mirror, tmp_path):
    out = tmp_path / "manifest.json"
    subprocess.run([sys.executable, "-m", "lm_eval_ext.data.manifest", str(mirror), "--output", str(out)],
                   check=True, capture_output=True, cwd=Path(__file__).resolve().parents[1])
    assert out.read_text() == MANIFEST_PATH.read_text()


# --- resolution from the mirror -----------------------------------------------------------------

def test_mirror_resolution_of_lieder_stimuli(mirror, clean_env):
    found = resolve("lieder", LIEDER_BASE)
    assert found == type(found)(mirror / "lieder" / LIEDER_BASE, "mirror")
    first = json.loads(found.path.read_text().splitlines()[0])
    assert set(first) >= {"id", "sent", "expected"}
    assert not clean_env.exists()  # nothing was copied into the cache


def test_elitr_zip_member_read_in_place_with_password(mirror, clean_env):
    data = json.loads(read_zip_member("elitr_bench", "data.zip", ELITR_QA_DEV, password=b"utter"))
    assert set(data) == {"split", "meetings"} and data["meetings"]
    assert not clean_env.exists()


def test_elitr_zips_use_zipcrypto_not_aes(mirror):
    with zipfile.ZipFile(mirror / "elitr_bench" / "data.zip") as zf:
        info = zf.getinfo(ELITR_QA_DEV)
    assert info.flag_bits & 0x1 and info.compress_type != 99


def test_mirror_file_with_wrong_checksum_is_rejected(data_dir, tmp_path, monkeypatch, capsys):
    bad = tmp_path / "mirror" / "lieder" / LIEDER_BASE
    bad.parent.mkdir(parents=True)
    shutil.copy(data_dir / "lieder" / LIEDER_BASE, bad)
    monkeypatch.setenv("LM_EVAL_EXT_DATA_DIR", str(tmp_path / "mirror"))
    assert resolve_file("lieder", LIEDER_BASE) == bad  # good copy: accepted
    bad.write_bytes(bad.read_bytes().replace(b"dog", b"cat", 1))
    expected = pinned_file("lieder", LIEDER_BASE).sha256
    actual = hashlib.sha256(bad.read_bytes()).hexdigest()
    with pytest.raises(DataError) as err:  # changed file (new mtime): verified again
        resolve_file("lieder", LIEDER_BASE)
    message = str(err.value)
    assert str(bad) in message and expected in message and actual in message
    assert "lm-eval-ext data fetch lieder" in message
    capsys.readouterr()
    assert _cli("verify", "lieder") == 1
    out, err = capsys.readouterr()
    assert f"MISMATCH (mirror): {bad}: expected sha256 {expected}, got {actual}" in out.splitlines()
    total = len(dataset_files("lieder"))
    assert f"lieder: 0 ok, 1 mismatched, {total - 1} missing" in out.splitlines()  # the mirror holds that file only
    assert err == ("1 file(s) of lieder do not match the registry: replace them (`lm-eval-ext data fetch lieder` "
                   "after deleting a bad cache copy).\n")


def test_explicit_path_wins_over_mirror(mirror, tmp_path):
    mine = tmp_path / "my_stimuli.jsonl"
    mine.write_text('{"id": "x"}\n')  # deliberately not the registered content
    assert resolve("lieder", LIEDER_BASE, explicit=mine) == type(resolve("lieder", LIEDER_BASE))(mine, "explicit")
    with pytest.raises(DataError, match="does not exist"):
        resolve_file("lieder", LIEDER_BASE, explicit=tmp_path / "absent.jsonl")


# --- downloads -----------------------------------------------------------------------------------

STIMULI = b"".join(b'{"id": "%d", "sent": "The dog is here.", "expected": 1}\n' % i for i in range(2000))


def test_download_into_cache_then_reuse(registered, server, clean_env):
    pinned = registered({LIEDER_BASE: STIMULI})[LIEDER_BASE]
    server.put(pinned.url, STIMULI)
    found = resolve("lieder", LIEDER_BASE)
    assert found.how == "download" and found.path == clean_env / "lieder" / LIEDER_BASE
    assert found.path.read_bytes() == STIMULI
    assert resolve("lieder", LIEDER_BASE).how == "cache"
    assert server.count(pinned.url) == 1
    assert _files(clean_env) == {f"lieder/{LIEDER_BASE}"}


@pytest.mark.parametrize("with_length", [True, False], ids=["content_length", "no_content_length"])
def test_dropped_connection_is_retried(registered, server, clean_env, with_length):
    # With a Content-Length the short body is a transport error; without one it looks complete
    # and only its sha256 shows it is not: both are tried again.
    pinned = registered({LIEDER_BASE: STIMULI})[LIEDER_BASE]
    server.put(pinned.url, STIMULI)
    server.drop(pinned.url, times=1, with_length=with_length)
    found = resolve("lieder", LIEDER_BASE)
    assert found.how == "download" and found.path.read_bytes() == STIMULI
    assert server.count(pinned.url) == 2
    assert _files(clean_env) == {f"lieder/{LIEDER_BASE}"}


def test_half_written_download_leaves_nothing(registered, server, clean_env):
    pinned = registered({LIEDER_BASE: STIMULI})[LIEDER_BASE]
    server.put(pinned.url, STIMULI)
    server.drop(pinned.url, times=ATTEMPTS)  # every attempt breaks off half-way
    with pytest.raises(DataError) as err:
        resolve_file("lieder", LIEDER_BASE)
    message = str(err.value)
    assert f"{server.base}{server.path_of(pinned.url)} failed ({ATTEMPTS} attempts)" in message
    assert "lm-eval-ext data fetch lieder" in message and "\n" not in message
    assert server.count(pinned.url) == ATTEMPTS
    assert _files(clean_env) == set()


def test_interrupted_download_leaves_nothing(registered, server, clean_env, monkeypatch):
    pinned = registered({LIEDER_BASE: STIMULI})[LIEDER_BASE]
    server.put(pinned.url, STIMULI)

    class InterruptedBar(download_module.tqdm):
        def update(self, n=1):
            super().update(n)
            raise KeyboardInterrupt  # Ctrl-C after the first block was written

    monkeypatch.setattr(download_module, "tqdm", InterruptedBar)
    with pytest.raises(KeyboardInterrupt):
        resolve_file("lieder", LIEDER_BASE)
    assert server.count(pinned.url) == 1  # an interrupt is not retried
    assert (clean_env / "lieder").is_dir() and _files(clean_env) == set()


def test_download_checksum_mismatch_leaves_nothing(server, clean_env):
    pinned = pinned_file("lieder", LIEDER_BASE)
    served = b"not the registered file\n"
    server.put(pinned.url, served)
    with pytest.raises(DataError) as err:
        resolve_file("lieder", LIEDER_BASE)
    message = str(err.value)
    assert message.startswith(f"Checksum mismatch for the download of {server.base}{server.path_of(pinned.url)} "
                              f"({ATTEMPTS} attempts): expected sha256 {pinned.sha256}, "
                              f"got {hashlib.sha256(served).hexdigest()}.")
    assert server.count(pinned.url) == ATTEMPTS  # a body can arrive short without any error: tried again
    assert _files(clean_env) == set()


@pytest.mark.parametrize("variable", ["LM_EVAL_EXT_OFFLINE", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"])
def test_offline_missing_file_gives_one_paragraph(server, monkeypatch, tmp_path, clean_env, variable):
    pinned = pinned_file("lieder", LIEDER_BASE)
    server.put(pinned.url, b"anything")
    monkeypatch.setenv("LM_EVAL_EXT_DATA_DIR", str(tmp_path / "empty_mirror"))
    monkeypatch.setenv(variable, "1")
    with pytest.raises(DataError) as err:
        resolve_file("lieder", LIEDER_BASE)
    message = str(err.value)
    assert "'lieder'" in message and LIEDER_BASE in message and "\n" not in message
    assert str(tmp_path / "empty_mirror" / "lieder" / LIEDER_BASE) in message
    assert str(clean_env / "lieder" / LIEDER_BASE) in message
    assert "lm-eval-ext data fetch lieder" in message and "LM_EVAL_EXT_DATA_DIR" in message
    assert f"{variable}=1" in message
    assert server.requests == []  # offline really means no request
    assert err.value.__cause__ is None and err.value.__suppress_context__


def test_network_failure_is_a_data_error(monkeypatch, clean_env):
    with socket.socket() as sock:  # a port with nobody listening
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("LM_EVAL_EXT_DOWNLOAD_BASE", f"http://127.0.0.1:{port}")
    with pytest.raises(DataError) as err:
        resolve_file("lieder", LIEDER_BASE)
    assert "lm-eval-ext data fetch lieder" in str(err.value) and f"failed ({ATTEMPTS} attempts)" in str(err.value)
    assert _files(clean_env) == set()


def test_http_404_is_a_data_error_and_not_retried(server, clean_env):
    with pytest.raises(DataError, match="HTTP 404"):
        resolve_file("lieder", LIEDER_BASE)
    assert server.count(pinned_file("lieder", LIEDER_BASE).url) == 1
    assert _files(clean_env) == set()


def test_file_without_canonical_url_says_so(server):
    with pytest.raises(DataError, match="no canonical download URL") as err:
        resolve_file("magnifico", "interpretations.json")
    assert "mappings.py" in str(err.value) and server.requests == []


# --- the ELITR transcripts: members of one corpus archive ------------------------------------------

def _corpus_archive(contents: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("../elsewhere/unrelated.txt", b"never extracted: not a registered member")
        for member, data in contents.items():
            zf.writestr(f"ELITR-minuting-corpus/{member}", data)
    return buf.getvalue()


def _transcript_files() -> list:
    return [s for s in dataset_files("elitr_bench") if s.archive_url]


def test_elitr_transcripts_come_from_the_corpus_archive_once(mirror, server, clean_env, monkeypatch):
    pinned_files = _transcript_files()
    server.put(pinned_files[0].archive_url, _corpus_archive({s.member: (mirror / "elitr_bench" / s.path).read_bytes()
                                                      for s in pinned_files}))
    monkeypatch.delenv("LM_EVAL_EXT_DATA_DIR")
    found = resolve("elitr_bench", TRANSCRIPT)
    assert found.how == "download" and found.path == clean_env / "elitr_bench" / TRANSCRIPT
    assert len(server.requests) == 1
    for s in pinned_files:  # every transcript cached and verified from the single download
        assert hashlib.sha256((clean_env / "elitr_bench" / s.path).read_bytes()).hexdigest() == s.sha256
        assert resolve("elitr_bench", s.path).how == "cache"
    assert len(server.requests) == 1
    assert _files(clean_env) == {f"elitr_bench/{s.path}" for s in pinned_files}
    assert not (clean_env.parent / "elsewhere").exists()


def test_elitr_archive_member_with_wrong_content_is_rejected(server, clean_env):
    pinned = pinned_file("elitr_bench", TRANSCRIPT)
    server.put(pinned.archive_url, _corpus_archive({pinned.member: b"tampered transcript"}))
    with pytest.raises(DataError, match="Checksum mismatch") as err:
        resolve_file("elitr_bench", TRANSCRIPT)
    assert f"member {pinned.member} of {pinned.archive_url}" in str(err.value)
    assert _files(clean_env) == set()


def test_bad_corpus_archive_is_fetched_once_per_run(server, clean_env, capsys):
    """Every transcript fails its checksum: one download, one error per transcript naming the URL."""
    pinned_files = _transcript_files()
    url = pinned_files[0].archive_url
    server.put(url, _corpus_archive({s.member: b"tampered transcript" for s in pinned_files}))
    assert _cli("fetch", "elitr_bench") == 1
    assert server.count(url) == 1
    err = capsys.readouterr().err
    assert err.count(f"Checksum mismatch for member {pinned_files[0].member} of {url}:") == 1
    assert ".archive." not in err  # no path of the temporary download (gone by now)
    with pytest.raises(DataError) as again:  # later in the same run: the same answer, no download
        resolve_file("elitr_bench", pinned_files[-1].path)
    assert str(again.value).startswith(f"Checksum mismatch for member {pinned_files[-1].member} of {url}:")
    assert server.count(url) == 1
    assert not (clean_env / "elitr_bench" / "ELITR-minuting-corpus").exists()


def test_corrupted_corpus_archive_is_one_error_naming_the_url(server, clean_env, capsys):
    url = _transcript_files()[0].archive_url
    server.put(url, b"PK\x03\x04 cut short")
    assert _cli("fetch", "elitr_bench") == 1
    assert server.count(url) == 1
    err = capsys.readouterr().err
    assert err.count(f"{url} is not a readable zip archive") == 1  # printed once for the 18 transcripts
    assert ".archive." not in err


# --- zip reading ---------------------------------------------------------------------------------

@pytest.mark.parametrize("damage", ["truncate", "garble"])
def test_corrupted_zip_is_a_data_error(mirror, tmp_path, damage):
    data = (mirror / "elitr_bench" / "data.zip").read_bytes()
    if damage == "truncate":
        data = data[: len(data) // 2]
    else:  # keep the directory, garble the compressed bytes of every member
        data = data[:100] + bytes(b ^ 0x5A for b in data[100:len(data) - 2000]) + data[len(data) - 2000:]
    broken = tmp_path / "data.zip"
    broken.write_bytes(data)
    with pytest.raises(DataError, match="corrupted"):
        read_zip_member("elitr_bench", "data.zip", ELITR_QA_DEV, password=b"utter", explicit=broken)


def test_wrong_password_missing_password_and_missing_member(mirror):
    with pytest.raises(DataError, match="password"):
        read_zip_member("elitr_bench", "data.zip", ELITR_QA_DEV, password=b"wrong")
    with pytest.raises(DataError, match="password is required"):
        read_zip_member("elitr_bench", "data.zip", ELITR_QA_DEV)
    with pytest.raises(DataError, match="has no member 'data/absent.json'"):
        read_zip_member("elitr_bench", "data.zip", "data/absent.json", password=b"utter")


# --- archive members: read in memory, unsafe names refused -----------------------------------------

def _zip(path: Path, entries: dict[str, bytes], symlink: str | None = None) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in entries.items():
            zf.writestr(name, data)
        if symlink:
            info = zipfile.ZipInfo(symlink)
            info.external_attr = (0o120777 << 16)  # S_IFLNK
            zf.writestr(info, "/etc/passwd")
    return path


def test_members_by_suffix_are_read_in_memory(tmp_path):
    # top/xb.txt comes first and ends in "b.txt", but not at a '/' boundary
    archive = _zip(tmp_path / "ok.zip", {"top/xb.txt": b"X", "top/a.txt": b"A", "top/sub/b.txt": b"B"})
    found = read_members_by_suffix(archive, ["b.txt", "top/a.txt", "absent.txt"], shown="ok.zip")
    assert found == {"b.txt": b"B", "top/a.txt": b"A"}
    assert _files(tmp_path) == {"ok.zip"}  # nothing extracted


@pytest.mark.parametrize("case", ["dotdot", "dotdot_inside", "backslash_dotdot", "absolute", "drive", "symlink"])
def test_members_by_suffix_reject_unsafe_entries(tmp_path, case):
    work = tmp_path / "work"
    work.mkdir()
    good = {"fine/first.txt": b"read first if member names were not checked"}
    bad_name = {"dotdot": "../evil.txt", "dotdot_inside": "fine/../../evil.txt", "backslash_dotdot": "..\\evil.txt",
                "absolute": str(tmp_path / "evil.txt"), "drive": "C:/evil.txt"}.get(case)
    if case == "symlink":
        archive, bad_name = _zip(work / "a.zip", good, symlink="fine/evil.txt"), "fine/evil.txt"
    else:
        archive = _zip(work / "a.zip", {**good, bad_name: b"evil"})
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    with pytest.raises(DataError) as err:
        read_members_by_suffix(archive, ["first.txt", "evil.txt"], shown="a.zip")
    assert repr(bad_name) in str(err.value)
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before  # nothing written anywhere


# --- Spider --------------------------------------------------------------------------------------

def test_spider_dir_from_mirror_and_missing_baseball(mirror):
    assert spider_database_dir() == mirror / "spider" / "database"
    assert spider_database_path("hr_1") == mirror / "spider" / "database" / "hr_1" / "hr_1.sqlite"
    assert spider_database_path("cre_Doc_Tracking_DB").name == "cre_doc_tracking_db.sqlite"
    with pytest.raises(DataError) as err:
        spider_database_path("baseball_1")
    assert "baseball_1" in str(err.value) and "Spider 1.0" in str(err.value)
    assert "LM_EVAL_EXT_SPIDER_DIR" in str(err.value)


def test_spider_dir_env_wins_and_is_checked(mirror, tmp_path, monkeypatch):
    own = tmp_path / "spider_db"
    monkeypatch.setenv("LM_EVAL_EXT_SPIDER_DIR", str(own))
    with pytest.raises(DataError, match="does not exist.*Spider 1.0"):
        spider_database_dir()
    (own / "empty_db").mkdir(parents=True)
    with pytest.raises(DataError, match="holds no"):
        spider_database_dir()
    (own / "tiny").mkdir()
    (own / "tiny" / "tiny.sqlite").write_bytes(b"")
    assert spider_database_dir() == own
    assert spider_database_path("tiny") == own / "tiny" / "tiny.sqlite"


def test_spider_dir_unconfigured():
    with pytest.raises(DataError, match="LM_EVAL_EXT_SPIDER_DIR"):
        spider_database_dir()


# --- CLI -----------------------------------------------------------------------------------------

def test_cli_where_prints_mirror_path(mirror, capsys):
    assert _cli("where", "lieder", LIEDER_BASE) == 0
    assert capsys.readouterr().out.strip() == f"{mirror / 'lieder' / LIEDER_BASE}  (mirror)"
    assert _cli("where", "spider") == 0
    assert capsys.readouterr().out.strip() == f"{mirror / 'spider' / 'database'}  (mirror)"


def test_cli_where_reports_errors_without_traceback(capsys):
    assert _cli("where", "lieder", LIEDER_BASE, "--path", "/nonexistent/file.jsonl") == 1
    assert "does not exist" in capsys.readouterr().err


def test_cli_verify_passes_on_real_mirror(mirror, capsys):
    assert _cli("verify", "lieder") == 0
    assert f"lieder: {len(dataset_files('lieder'))} ok, 0 mismatched, 0 missing" in capsys.readouterr().out


def test_cli_fetch_downloads_and_summarizes(registered, server, clean_env, capsys):
    files = {LIEDER_BASE: STIMULI, "human/human_accuracy.csv": b"item,accuracy\n1,0.9\n"}
    for path, pinned in registered(files).items():
        server.put(pinned.url, files[path])
    assert _cli("fetch", "lieder") == 0
    assert "lieder: 2 files (2 download)" in capsys.readouterr().out
    assert _cli("fetch", "lieder") == 0
    assert "lieder: 2 files (2 cache)" in capsys.readouterr().out
    assert _cli("where", "lieder", LIEDER_BASE) == 0
    assert capsys.readouterr().out.strip() == f"{clean_env / 'lieder' / LIEDER_BASE}  (cache)"


def test_cli_fetch_tries_an_unreachable_host_once(registered, clean_env, monkeypatch, capsys):
    """Offline, each file would wait out its tries: after the first, the host's other files are only looked for
    locally (a cached one is still found)."""
    files = {f"stimuli/{n}.jsonl": f"{n}\n".encode() for n in "abc"}
    registered(files)
    (clean_env / "lieder/stimuli").mkdir(parents=True)
    (clean_env / "lieder/stimuli/c.jsonl").write_bytes(files["stimuli/c.jsonl"])
    with socket.socket() as sock:  # a port with nobody listening
        sock.bind(("127.0.0.1", 0))
        host = f"127.0.0.1:{sock.getsockname()[1]}"
    monkeypatch.setenv("LM_EVAL_EXT_DOWNLOAD_BASE", f"http://{host}")
    assert _cli("fetch", "lieder") == 1
    captured = capsys.readouterr()
    assert "lieder: 3 files (1 cache, 1 failed, 1 not tried)" in captured.out
    first, skipped = captured.err.splitlines()
    assert first.startswith("Dataset 'lieder': file 'stimuli/a.jsonl' was not found.")
    assert f"then downloading http://{host}/files.invalid/lieder/stimuli/a.jsonl failed ({ATTEMPTS} attempts)" in first
    assert skipped == (f"lieder: 1 more file(s) from {host} were not tried, as {host} could not be reached (above). "
                       "Run `lm-eval-ext data fetch lieder` again once it can be.")


def test_cli_fetch_offline_lists_the_first_errors(monkeypatch, capsys):
    monkeypatch.setenv("LM_EVAL_EXT_OFFLINE", "1")
    total = len(dataset_files("lieder"))
    assert _cli("fetch", "lieder") == 1
    captured = capsys.readouterr()
    assert f"lieder: {total} files ({total} failed)" in captured.out
    lines = captured.err.splitlines()
    assert len(lines) == 6 and all("lm-eval-ext data fetch lieder" in line for line in lines[:5])
    assert lines[5] == f"{total} problems in all; the first 5 distinct ones are shown above."
