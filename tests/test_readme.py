"""The README's install line installs the plugin from this checkout as written, and its run snippets (its `lm_eval`
commands and the `simple_evaluate` script) run as written on a machine without a GPU, and write their results.

The install runs in a fresh venv whose other packages are this venv's (a path entry): the test suite has no
network, so pip is told through its environment to use no index and no build isolation (``PIP_NO_INDEX``,
``PIP_NO_BUILD_ISOLATION``), the command itself is the README's.

Two substitutions, and only these, because the test suite has no network and a few minutes at most:

- the model: ``EleutherAI/pythia-160m`` becomes the tiny random model built offline (``tiny_model_dir``), the
  other arguments staying as written (the tests download no model);
- ``--limit 2`` (``limit=2`` in Python): the check is that the snippet runs through and writes its results;
  all of ``lieder_base`` on a CPU adds minutes and nothing to that.

No ``--device`` is added: what runs is what the README says, with the harness's defaults on a CPU machine.
``lm_eval ls tasks`` is the very command the listing tests share (``plain_task_listing``, run once per test
run in a fresh interpreter): its output is read from there.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
README_MODEL = "EleutherAI/pythia-160m"

pytestmark = pytest.mark.slow


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def _lm_eval_commands() -> list[str]:
    """Every ``lm_eval ...`` command of the README's bash blocks, continuation lines joined, comments dropped."""
    commands = []
    for block in _blocks("bash"):
        for command in block.replace("\\\n", " ").splitlines():
            command = re.sub(r"\s+#.*$", "", command).strip()
            if command.startswith("lm_eval "):
                commands.append(" ".join(command.split()))
    return commands


def _on_the_tiny_model(text: str, model: Path) -> str:
    assert README_MODEL in text, text
    return text.replace(README_MODEL, str(model))


def test_the_readme_has_the_snippets_this_test_runs():
    commands = _lm_eval_commands()
    assert [c.split()[1] for c in commands] == ["run", "ls", "validate"], commands
    assert [b for b in _blocks("python") if "simple_evaluate" in b], "no simple_evaluate snippet in README.md"


def test_lm_eval_commands_as_written(run_cli, tiny_model_dir, data_dir, tmp_path, plain_task_listing):
    for command in _lm_eval_commands():
        argv = command.split()
        if argv[1] == "run":
            argv = _on_the_tiny_model(command, tiny_model_dir).split() + ["--limit", "2"]
        if argv == plain_task_listing.args:  # this very command, run once per test run for the listing tests
            proc = plain_task_listing
        else:
            proc = run_cli(argv, cwd=tmp_path)
        assert proc.returncode == 0, f"{command}\n{proc.stderr[-3000:]}"
        if argv[1] == "run":
            assert len(list((tmp_path / "results").rglob("results_*.json"))) == 1, command
            assert len(list((tmp_path / "results").rglob("samples_lieder_base_*.jsonl"))) == 1, command
        if argv[1] == "ls":
            assert "lieder_base" in proc.stdout and "magnifico_direct_base" in proc.stdout


def test_simple_evaluate_as_written(run_cli, tiny_model_dir, data_dir, tmp_path):
    (snippet,) = [b for b in _blocks("python") if "simple_evaluate" in b]
    script = _on_the_tiny_model(snippet, tiny_model_dir)
    assert script.count('tasks=["lieder_base"]') == 1, snippet
    script = script.replace('tasks=["lieder_base"]', 'tasks=["lieder_base"], limit=2')
    script += 'print("scored:", sorted(results["results"]["lieder_base"]))\n'
    # a process of its own: a script as a user runs it, the plugin found by the start-up hook of a fresh interpreter
    proc = run_cli([sys.executable, "-c", script], cwd=tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "scored: " in proc.stdout and "'acc,none'" in proc.stdout, proc.stdout[-2000:]


def _install_commands() -> list[str]:
    """The commands of the bash block of the README's "Install" section, comments dropped."""
    section = README.read_text(encoding="utf-8").split("\n## Install\n", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```bash\n(.*?)```", section, re.S)
    return [re.sub(r"\s+#.*$", "", line).strip() for line in block.splitlines() if line.strip()]


def test_the_install_line_installs_this_checkout_as_written(tmp_path, source_tree_builds):
    from lm_eval_ext import __version__

    (command,) = _install_commands()
    assert command == 'pip install ".[hf]"'  # what runs below; the published name is for after a release
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    # the venv's own setuptools would stand before this venv's (torch needs a newer one than the venv's bundled)
    subprocess.run([str(python), "-m", "pip", "uninstall", "-q", "-y", "setuptools"], check=True, timeout=300)
    site = Path(subprocess.check_output([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                        text=True).strip())
    (site / "zz_parent_venv.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env |= {"PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", "PIP_NO_INDEX": "1",
            "PIP_NO_BUILD_ISOLATION": "0", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    with source_tree_builds:  # the build writes the checkout's build/ and egg-info
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-e", "-c", command], cwd=README.parent, env=env,
                              capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    shown = subprocess.run([str(python), "-c", "import importlib.metadata as m, json; d = m.distribution('lm-eval-ext'); "
                            "print(json.dumps([d.version, str(d.locate_file('')), json.loads(d.read_text('direct_url.json'))]))"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    version, location, origin = json.loads(shown.stdout)
    assert (version, Path(location)) == (__version__, site)  # installed into the fresh venv, not this one's
    assert origin["url"] == README.parent.as_uri() and origin["dir_info"] == {}  # this checkout, not editable
    tasks = subprocess.run([str(venv / "bin" / "lm-eval-ext"), "tasks-dir"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=300)
    assert tasks.returncode == 0 and Path(tasks.stdout.strip()) == site / "lm_eval_ext" / "tasks", tasks.stderr
