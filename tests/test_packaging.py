"""The distributions a release publishes: this checkout's sdist and wheel, built and checked as
`.github/workflows/release.yml` builds and checks them (`python -m build`, `twine check --strict`), and that
workflow itself.

`python -m build` makes the sdist, then the wheel from the sdist: a file the wheel needs (tasks/, templates/, the
start-up hook's source, the README that setup.py reads as the long description) and the sdist lacks would make the
build fail or the wheel differ from the one built from the checkout (``plugin_wheel``). The build runs without
isolation (the build backend of this venv), so that the test needs no network.
"""
from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
import yaml

from helpers.files import PROJECT_ROOT
from lm_eval_ext import __version__

RELEASE = PROJECT_ROOT / ".github" / "workflows" / "release.yml"
NAME = f"lm_eval_ext-{__version__}"

pytestmark = pytest.mark.xdist_group("packaging")  # one worker builds `distributions`


@pytest.fixture(scope="module")
def distributions(tmp_path_factory, source_tree_builds) -> tuple[Path, Path]:
    """(sdist, wheel) of this checkout, built as the release workflow builds them."""
    out = tmp_path_factory.mktemp("dist")
    with source_tree_builds:  # setuptools writes the checkout's build/ and egg-info
        proc = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(PROJECT_ROOT)],
                              capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out / f"{NAME}.tar.gz", out / f"{NAME}-py3-none-any.whl"


@pytest.mark.slow
def test_twine_check_passes(distributions):
    proc = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *map(str, distributions)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("PASSED") == 2, proc.stdout


def _checkout_files(folder: str) -> set[str]:
    return {p.relative_to(PROJECT_ROOT).as_posix() for p in (PROJECT_ROOT / folder).rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


@pytest.mark.slow
def test_the_sdist_holds_what_the_wheel_needs_and_no_tests(distributions, plugin_wheel):
    sdist, wheel = distributions
    with tarfile.open(sdist) as archive:
        names = {name.removeprefix(f"{NAME}/") for name in archive.getnames()}
        pkg_info = archive.extractfile(f"{NAME}/PKG-INFO").read().decode("utf-8")
    assert {"setup.py", "pyproject.toml", "README.md", "lm_eval_ext/startup_hook.py", "lm_eval_ext/__init__.py"} <= names
    assert _checkout_files("tasks") | _checkout_files("templates") <= names
    assert not [n for n in names if n.startswith(("tests/", "bench/", "docs/", ".github/"))]
    # setup.py's long description is the README, as Markdown (twine check renders it)
    assert "Description-Content-Type: text/markdown" in pkg_info
    assert pkg_info.split("\n\n", 1)[1].strip() == (PROJECT_ROOT / "README.md").read_text(encoding="utf-8").strip()

    # the wheel built from the sdist is the wheel built from the checkout, file for file
    def contents(path: Path) -> dict[str, bytes]:
        with zipfile.ZipFile(path) as archive:
            return {n: archive.read(n) for n in archive.namelist() if not n.endswith(".dist-info/RECORD")}

    from_sdist, from_checkout = contents(wheel), contents(plugin_wheel)
    assert from_sdist.keys() == from_checkout.keys()
    assert [n for n in from_sdist if from_sdist[n] != from_checkout[n]] == []
    assert "lm_eval_ext_autoload.pth" in from_sdist and "lm_eval_ext/tasks/lieder/lieder_base.yaml" in from_sdist


def test_the_release_workflow_builds_checks_and_publishes_from_a_version_tag():
    workflow = yaml.safe_load(RELEASE.read_text())
    assert workflow[True] == {"push": {"tags": ["v*"]}}  # YAML 1.1 reads the key `on` as true
    assert workflow["permissions"] == {"contents": "read"}
    build, publish = workflow["jobs"]["build"], workflow["jobs"]["publish"]
    runs = [step.get("run", "") for step in build["steps"]]
    assert "python -m build" in runs and "python -m twine check --strict dist/*" in runs
    assert runs.index("python -m build") < runs.index("python -m twine check --strict dist/*")
    # trusted publishing: an OIDC token for the publishing job only, no password or API token anywhere
    assert publish["needs"] == "build" and publish["permissions"] == {"id-token": "write"}
    assert publish["environment"] == {"name": "pypi"}
    assert publish["steps"][-1] == {"uses": "pypa/gh-action-pypi-publish@release/v1"}
    assert "password" not in RELEASE.read_text() and "secrets." not in RELEASE.read_text()


@pytest.mark.parametrize(("tag", "passes"), [(f"v{__version__}", True), ("v9.9.9", False)])
def test_the_release_refuses_a_tag_that_is_not_the_version_built(tmp_path, tag, passes):
    (step,) = [s for s in yaml.safe_load(RELEASE.read_text())["jobs"]["build"]["steps"]
               if s.get("name") == "The tag names the version built"]
    (tmp_path / "dist").mkdir()
    for name in (f"{NAME}.tar.gz", f"{NAME}-py3-none-any.whl"):
        (tmp_path / "dist" / name).write_bytes(b"")
    proc = subprocess.run(["bash", "--noprofile", "--norc", "-e", "-c", step["run"]], cwd=tmp_path,
                          env={"GITHUB_REF_NAME": tag, "PATH": "/usr/bin:/bin"}, capture_output=True, text=True)
    assert (proc.returncode == 0) is passes, proc.stdout + proc.stderr
