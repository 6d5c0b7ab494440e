"""Running the harness for a test, and reading and checking what the report, export and leaderboard write."""
from __future__ import annotations

import csv
import importlib.metadata
import os
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
PROJECT_ROOT = Path(__file__).resolve().parents[2]
TESTS = PROJECT_ROOT / "tests"
FIXTURES = TESTS / "fixtures"


def _installed() -> bool:
    try:
        importlib.metadata.distribution("lm-eval-ext")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


# Installed (e.g. CI's wheel, or an editable install): the installed copy is left in charge, so a wheel test is not
# silently shadowed by the source tree. Otherwise the tests and the processes they start import the checkout.
PLUGIN_INSTALLED = _installed()


def subprocess_env(extra: dict | None = None) -> dict:
    """The environment of a process a test starts: this one's, the offline variables, this venv's bin first on
    ``PATH``, and on ``PYTHONPATH`` ``tests/`` (for ``python -m doubles``) and the checkout when the plugin is not
    installed (an installed copy, e.g. CI's wheel, is left in charge); then ``extra``, whose ``PYTHONPATH`` (e.g. a
    stand-in package) goes first."""
    extra = dict(extra or {})
    env = {**os.environ, **OFFLINE}
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    paths = [extra.pop("PYTHONPATH", None), str(TESTS), None if PLUGIN_INSTALLED else str(PROJECT_ROOT),
             env.get("PYTHONPATH")]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, paths))
    return {**env, **extra}


def harness(out: Path, model: str, model_args: str, tasks: str, *extra: str, env: dict | None = None,
            stdout: Path | None = None) -> Path:
    """Run ``lm-eval-ext run`` (in this process, with the test doubles) with --output_path out --log_samples; return
    out. ``stdout``: a file to keep what the command printed in."""
    from .commands import run

    cmd = ["lm-eval-ext", "run", "--model", model, "--model_args", model_args, "--tasks", tasks,
           "--output_path", str(out), "--log_samples", *extra]
    proc = run(cmd, env=env)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stderr[-4000:]}"
    if stdout is not None:
        stdout.write_text(proc.stdout)
    return out


def results_json(out: Path) -> dict:
    """The one results file under ``out``, its tasks named as the plugin's readers name them (lm-eval 0.5 keys the
    tasks of a group by their path, ``lieder::lieder_base``: lm_eval_ext/results/load.py)."""
    from lm_eval_ext.results.load import read_run

    (path,) = out.rglob("results_*.json")
    return read_run(path).data


def read_csv(path: Path) -> list[dict]:
    """The rows of a CSV file as dicts."""
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def num(cell: str) -> float | None:
    """A CSV cell as a number (None when empty)."""
    return None if cell == "" else float(cell)


def assert_images(png: Path, svg: Path) -> None:
    """A real picture: a PNG of a sensible size with many colours, an SVG with drawn paths."""
    from PIL import Image

    with Image.open(png) as image:
        assert image.format == "PNG"
        assert image.width >= 400 and image.height >= 300, image.size
        colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
        assert colours is not None and len(colours) > 20, f"{png} looks blank"
    root = ET.parse(svg).getroot()
    assert root.tag.endswith("svg")
    assert len(root.findall(".//{http://www.w3.org/2000/svg}path")) > 10, f"{svg} draws almost nothing"
