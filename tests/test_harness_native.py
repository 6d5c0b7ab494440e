"""The plain harness finds the plugin: discovery, its opt-out and failure modes, install/uninstall, the boundary.

Subprocess tests run the real ``lm_eval`` command or a fresh interpreter, so the start-up hook
(``lm_eval_ext_autoload.pth``) is what makes the plugin visible, exactly as for a user.
"""
from __future__ import annotations

import json
import math
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PLUGIN_TASKS = ("lieder_base", "lieder", "litm_qa_20docs", "lost_in_the_middle", "magnifico_direct_base", "magnifico",
                "elitr_bench_qa_dev_st", "elitr_bench_qa_dev_mt", "elitr_bench", "elitr_bench_cs")


def test_the_boundary_finds_everything_it_relies_on():
    from lm_eval_ext.boundary import CHECKED_ON, missing_internals

    missing = missing_internals()
    assert not missing, (
        "The installed lm-eval no longer has what lm_eval_ext/boundary.py relies on (checked on lm-eval "
        f"{', '.join(CHECKED_ON)}): {'; '.join(missing)}. Adapt the boundary to this harness version.")


def test_task_manager_and_models_see_the_plugin_in_process():
    from lm_eval.api.registry import get_model
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_defaults=False)
    assert set(PLUGIN_TASKS) <= set(manager.all_tasks)
    # a user's --include_path is indexed after the plugin's (it wins) and the plugin's is not added twice
    again = TaskManager(include_defaults=False, include_path=str(ROOT / "tasks"))
    assert again.all_tasks == manager.all_tasks
    assert get_model("ext-canned-gen").__name__ == "CannedGenLM"  # a test double, imported when asked for
    assert get_model("hf").__name__ == "HFLM"  # the built-ins are still there


def test_test_doubles_are_not_imported_by_a_harness_start(run_cli):
    code = ("import sys; from lm_eval.tasks import TaskManager; import lm_eval.api.registry as r; "
            "TaskManager(include_defaults=False); print('ext-canned-gen' in r.model_registry, "
            "'lm_eval_ext.models.scripted' in sys.modules)")
    proc = run_cli([sys.executable, "-c", code])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True", "False"]  # registered by name, imported only when asked for


def test_opt_out_leaves_the_harness_alone(run_cli):
    code = "from lm_eval.tasks import TaskManager; print('lieder_base' in TaskManager(include_defaults=False).all_tasks)"
    assert run_cli([sys.executable, "-c", code]).stdout.split() == ["True"]
    proc = run_cli([sys.executable, "-c", code], env={"LM_EVAL_EXT_AUTOLOAD": "0"})
    assert proc.returncode == 0 and proc.stdout.split() == ["False"]


@pytest.mark.parametrize("breakage, expected", [
    # activating the plugin fails once the harness module ran
    ("import lm_eval_ext.boundary as b\n"
     "def broken(name, module): raise RuntimeError('simulated breakage')\n"
     "b.on_harness_import = broken\n", "(RuntimeError: simulated breakage)"),
    # the plugin cannot be imported at all (importing it raises, as a broken install does)
    ("import sys\nsys.modules['lm_eval_ext.autoload'] = None\n",
     "(ModuleNotFoundError: import of lm_eval_ext.autoload halted; None in sys.modules)"),
], ids=["activation-fails", "import-fails"])
def test_a_broken_plugin_is_one_warning_and_the_harness_goes_on(run_cli, breakage, expected):
    code = breakage + (
        "from lm_eval.tasks import TaskManager\n"
        "from lm_eval.api.registry import get_model\n"
        "print(get_model('hf').__name__, 'lieder_base' in TaskManager(include_defaults=False).all_tasks)\n"
    )
    proc = run_cli([sys.executable, "-c", code])
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("lm-eval-ext: warning")]
    assert len(warnings) == 1 and expected in warnings[0] and "LM_EVAL_EXT_AUTOLOAD=0" in warnings[0], warnings
    assert proc.stdout.split() == ["HFLM", "False"]  # the harness works, without the plugin's tasks


def test_a_harness_that_discovers_plugins_itself_is_left_alone():
    from types import SimpleNamespace

    from lm_eval_ext import boundary

    class Manager:
        def __init__(self, verbosity=None, include_path=None, include_defaults=True, metadata=None):
            self.include_path = include_path

    native = SimpleNamespace(TaskManager=Manager, discover_plugin_task_paths=lambda: ())
    boundary.on_harness_import("lm_eval.tasks.manager", native)
    assert Manager(include_path="mine").include_path == "mine"  # not wrapped: the harness reads our entry point
    old = SimpleNamespace(TaskManager=Manager)
    boundary.on_harness_import("lm_eval.tasks.manager", old)
    assert Manager(include_path="mine").include_path[-1] == "mine" and len(Manager().include_path) == 1


def test_entry_points_are_declared():
    from importlib.metadata import distribution

    points = {(p.group, p.name): p.value for p in distribution("lm-eval-ext").entry_points}
    assert points[("lm_eval.tasks", "lm_eval_ext")] == "lm_eval_ext.tasks"
    assert points[("lm_eval.models", "ext-canned-gen")] == "lm_eval_ext.models.scripted:CannedGenLM"
    assert points[("lm_eval.models", "ext-loglik-table")] == "lm_eval_ext.models.scripted:LoglikTableLM"
    import importlib.util

    # what the harness's task entry point resolves: the package's directory, holding the YAMLs
    found = importlib.util.find_spec("lm_eval_ext.tasks")
    folder = Path(found.submodule_search_locations[0])
    assert (folder / "lieder" / "lieder_base.yaml").is_file()


def test_every_task_yaml_declares_the_metrics_every_document_reports():
    """metric_list = what each document reports (the harness's loggers read every listed metric from each sample)."""
    from lm_eval.tasks import TaskManager

    from lm_eval_ext.lieder.scoring import metric_names

    index = TaskManager(include_defaults=False).task_index
    for name, entry in index.items():
        cfg = entry.cfg or {}
        if "task" not in cfg or "group" in cfg or isinstance(cfg.get("task"), list):
            continue
        listed = [m["metric"] for m in cfg.get("metric_list") or []]
        assert listed, f"{name} declares no metric_list"
        if name.startswith("lieder_"):
            stimulus_set = cfg["dataset_kwargs"]["stimulus_set"]
            assert listed == metric_names(stimulus_set, relative=stimulus_set != "two"), name
        assert "version" in (cfg.get("metadata") or {}), f"{name} has no metadata.version"


def _fresh_venv(tmp_path: Path) -> Path:
    """A venv whose packages are this one's, through a plain path entry: this venv's .pth hooks do not run there."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(subprocess.check_output([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                        text=True).strip())
    (site / "zz_parent_venv.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def _validate(python: Path, run_cli, *tasks: str):
    return run_cli([str(python), "-m", "lm_eval", "validate", "--tasks", ",".join(tasks)], timeout=600)


@pytest.mark.slow
@pytest.mark.parametrize("editable", [False, True])
def test_install_then_uninstall_in_a_fresh_venv(tmp_path, run_cli, editable):
    python = _fresh_venv(tmp_path)
    site = Path(subprocess.check_output([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                        text=True).strip())
    before = set(site.iterdir())
    # --ignore-installed: the fresh venv sees this venv's lm-eval-ext through its path entry, and pip would
    # take it as already installed (a non-editable install, as in CI)
    pip = [sys.executable, "-m", "pip", "--python", str(python)]
    if editable:
        install = [*pip, "install", "--no-deps", "--ignore-installed", "--no-build-isolation", "-e", str(ROOT)]
    else:
        proc = run_cli([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path),
                        str(ROOT)], timeout=300)
        assert proc.returncode == 0, proc.stderr
        (wheel,) = tmp_path.glob("lm_eval_ext-*.whl")
        assert "lm_eval_ext_autoload.pth" in zipfile.ZipFile(wheel).namelist()
        install = [*pip, "install", "--no-deps", "--ignore-installed", str(wheel)]
    proc = run_cli(install, timeout=300)
    assert proc.returncode == 0, proc.stderr
    hook = (site / "lm_eval_ext_autoload.pth").read_text()
    assert hook.startswith("import sys; exec(") and hook.count("\n") == 1  # one line, the hook's source
    # a Python start runs the hook and imports nothing of the plugin
    proc = run_cli([str(python), "-c", "import sys; print(sys.meta_path[0].__name__, "
                                       "sorted(m for m in sys.modules if m.startswith('lm_eval_ext')))"])
    assert proc.stdout.split() == ["LmEvalExtStartupHook", "[]"], proc.stdout + proc.stderr
    proc = _validate(python, run_cli, "lieder_base", "elitr_bench_qa_dev_mt", "magnifico")
    assert proc.returncode == 0 and "All tasks found and valid" in proc.stdout, proc.stdout + proc.stderr
    proc = run_cli([*pip, "uninstall", "-y", "lm-eval-ext"], timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert set(site.iterdir()) == before, "pip uninstall left files behind"
    proc = _validate(python, run_cli, "lieder_base")
    assert proc.returncode != 0 and "Tasks not found: lieder_base" in proc.stdout + proc.stderr


@pytest.mark.slow
def test_plain_lm_eval_lists_and_validates_every_plugin_task(run_cli, plain_task_listing):
    proc = plain_task_listing  # lm_eval ls tasks
    assert proc.returncode == 0, proc.stderr
    table = proc.stdout.replace(" ", "")
    for name in PLUGIN_TASKS:
        assert f"|{name}|" in table, f"{name} is not listed by plain `lm_eval ls tasks`"
    proc = run_cli(["lm_eval", "validate", "--tasks", ",".join(PLUGIN_TASKS)], timeout=600)
    assert proc.returncode == 0 and "All tasks found and valid" in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.slow
def test_python_api_and_both_commands_give_the_same_numbers(run_cli, data_dir, tmp_path):
    import lm_eval

    table = tmp_path / "table.json"
    table.write_text(json.dumps({"entries": [], "default": -3.0}))
    api = lm_eval.simple_evaluate(model="ext-loglik-table", model_args={"table": str(table)}, tasks=["lieder_base"])
    numbers = {}
    for command in (["lm_eval", "run"], ["lm-eval-ext", "run"]):
        out = tmp_path / command[0]
        proc = run_cli([*command, "--model", "ext-loglik-table", "--model_args", f"table={table}",
                        "--tasks", "lieder_base", "--output_path", str(out)], timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        numbers[command[0]] = json.loads(next(out.rglob("results_*.json")).read_text())["results"]["lieder_base"]
    expected = {k: v for k, v in api["results"]["lieder_base"].items() if k not in ("name", "alias")}
    for got in numbers.values():
        for key, value in expected.items():
            assert got[key] == value or (isinstance(value, float) and math.isnan(value) and math.isnan(got[key])), key
    assert expected["acc,none"] == 0.0  # every pair ties at the default log-prob: a tie is wrong
