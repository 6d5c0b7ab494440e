"""The plain harness finds the plugin: discovery, its opt-out and failure modes, install/uninstall, the boundary.

Subprocess tests run the real ``lm_eval`` command or a fresh interpreter, so the start-up hook
(``lm_eval_ext_autoload.pth``) is what makes the plugin visible, exactly as for a user.
"""
from __future__ import annotations

import configparser
import importlib.util
import json
import logging
import math
import subprocess
import sys
import sysconfig
import types
import zipfile
from pathlib import Path

import pytest

from doubles import MODELS as DOUBLES
from helpers.harness import skip_where_broken

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
PLUGIN_TASKS = ("lieder_base", "lieder", "litm_qa_20docs", "lost_in_the_middle", "magnifico_direct_base", "magnifico",
                "elitr_bench_qa_dev_st", "elitr_bench_qa_dev_mt", "elitr_bench", "elitr_bench_cs")


def test_the_boundary_finds_everything_it_relies_on():
    from lm_eval_ext.boundary import CHECKED_ON, missing_internals

    missing = missing_internals()
    assert not missing, (
        "The installed lm-eval no longer has what lm_eval_ext/boundary.py relies on (checked on lm-eval "
        f"{', '.join(CHECKED_ON)}): {'; '.join(missing)}. Adapt the boundary to this harness version.")


def test_task_manager_and_models_see_the_plugin_in_process(tmp_path):
    from lm_eval.api.registry import get_model
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_defaults=False)
    assert set(PLUGIN_TASKS) <= set(manager.all_tasks)
    # a user's --include_path is indexed after the plugin's: its task of the same name wins (#4015)
    (tmp_path / "lieder_base.yaml").write_text("task: lieder_base\ndataset_path: json\noutput_type: loglikelihood\n"
                                               "doc_to_text: x\ndoc_to_target: y\n")
    again = TaskManager(include_defaults=False, include_path=str(tmp_path))
    assert again.all_tasks == manager.all_tasks
    from lm_eval_ext.boundary import features

    index = again._task_index if features().private_task_index else again.task_index  # renamed in lm-eval 0.5
    assert index["lieder_base"].yaml_path.parent == tmp_path
    assert get_model("ext-replay").__name__ == "ReplayLM"
    assert get_model("hf").__name__ == "HFLM"  # the built-ins are still there


def test_task_paths_go_where_the_harness_puts_plugin_tasks(tmp_path, monkeypatch):
    """defaults < plugins < include_path, the plugins' also with include_defaults=False (#4015)."""
    import lm_eval.tasks.manager
    from lm_eval.tasks import TaskManager

    from lm_eval_ext import boundary
    from lm_eval_ext.paths import tasks_dir

    folders = []
    for name in ("b_mine", "a_yours"):  # names in the reverse of the order expected (not sorted by name)
        (tmp_path / name).mkdir()
        (tmp_path / name / f"{name}.yaml").write_text(f"task: {name}\ndataset_path: json\n"
                                                      "output_type: loglikelihood\ndoc_to_text: x\ndoc_to_target: y\n")
        folders.append(str(tmp_path / name))
    manager = TaskManager(include_path=folders, include_defaults=False)
    index = manager._task_index if boundary.features().private_task_index else manager.task_index  # renamed in 0.5
    names = list(index)  # in the order the harness indexed the directories
    assert names.index("lieder_base") < names.index("b_mine") < names.index("a_yours")
    # with the built-ins: the harness's own directory first, then the plugin's (what the plugin's index is given)
    builtins = Path(lm_eval.tasks.manager.__file__).parent
    assert boundary._with_plugin_tasks([builtins, Path("mine")], builtins) == [builtins, tasks_dir(), Path("mine")]
    monkeypatch.setitem(boundary._settings, "builtin_tasks", False)  # lm-eval-ext run, plugin tasks only
    assert set(TaskManager().all_tasks) == set(TaskManager(include_defaults=False).all_tasks)


def test_the_harness_keeps_its_own_arguments_and_warnings():
    from lm_eval.tasks import TaskManager

    mine = str(ROOT / "tasks" / "lieder")
    with pytest.warns(DeprecationWarning, match="verbosity") as caught:
        manager = TaskManager(verbosity="INFO", include_path=mine, include_defaults=False)
    assert manager.include_path is mine  # as given, not a list with the plugin's directory
    assert [w.filename for w in caught] == [__file__]  # the harness's stacklevel names its caller
    assert "lieder_base" in manager.all_tasks and "elitr_bench" in manager.all_tasks


def test_importing_the_harness_imports_nothing_of_the_plugin(run_cli):
    """Until a model is looked up by name (or tasks are listed); then ext-replay is registered, no test double."""
    # a fresh interpreter: what the start-up hook imports, from the start
    code = ("import sys, lm_eval, lm_eval.api.registry as r\n"
            "plugin = lambda: sorted(m for m in sys.modules if m.startswith('lm_eval_ext'))\n"
            "print(len(r.model_registry), plugin())\n"
            "r.get_model('hf')\n"
            "from lm_eval.models import MODEL_MAPPING\n"
            "print(sorted(set(r.model_registry) - set(MODEL_MAPPING)), 'lm_eval_ext.models.replay' in sys.modules)\n")
    proc = run_cli([sys.executable, "-c", code])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["0 []", "['ext-replay'] False"]


def test_opt_out_leaves_the_harness_alone(run_cli):
    # fresh interpreters: the start-up hook reads LM_EVAL_EXT_AUTOLOAD as the interpreter starts
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
    # a fresh interpreter: the plugin is broken in it before the harness is first imported
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


def _harness_pr():
    """The harness's proposed plugin discovery (tests/fixtures/harness_pr_plugin_discovery.py), fresh."""
    spec = importlib.util.spec_from_file_location("harness_pr_plugin_discovery", FIXTURES / "harness_pr_plugin_discovery.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _task_manager_with_plugin_discovery(pr):
    """The installed harness's task manager module with #4015 patched in: its line in TaskManager.__init__ and
    its discovery function (a fresh module; the harness's own is untouched)."""
    import lm_eval.tasks.manager as installed

    source = Path(installed.__file__).read_text(encoding="utf-8")
    assert pr.TASK_MANAGER_ANCHOR in source, "TaskManager.__init__ no longer lists the built-in tasks as #4015 expects"
    module = types.ModuleType(installed.__name__)
    module.__file__, module.__package__ = installed.__file__, installed.__package__
    module.discover_plugin_task_paths = pr.discover_plugin_task_paths
    exec(compile(source.replace(pr.TASK_MANAGER_ANCHOR, pr.TASK_MANAGER_ANCHOR + pr.TASK_MANAGER_LINE),
                 installed.__file__, "exec"), module.__dict__)
    return module


def _overrides(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "overrides existing task" in r.getMessage()]


def test_a_harness_that_discovers_plugin_tasks_itself_finds_each_once(caplog):
    from lm_eval.tasks._index import TaskIndex

    from lm_eval_ext import boundary
    from lm_eval_ext.paths import tasks_dir

    harness = _task_manager_with_plugin_discovery(_harness_pr())
    own = harness.TaskIndex
    boundary.on_harness_import("lm_eval.tasks.manager", harness)  # what the start-up hook does once it is imported
    assert harness.TaskIndex is own  # left alone: the harness reads the plugin's lm_eval.tasks entry point
    ours = TaskIndex.build([tasks_dir()])
    with caplog.at_level(logging.WARNING, logger="lm_eval.tasks._index"):
        manager = harness.TaskManager(include_defaults=False)
    assert set(ours) <= set(manager.all_tasks) and set(PLUGIN_TASKS) <= set(ours)
    assert _overrides(caplog) == []  # each plugin task indexed once
    # the check sees a plugin directory indexed twice
    with caplog.at_level(logging.WARNING, logger="lm_eval.tasks._index"):
        TaskIndex.build([tasks_dir(), tasks_dir()])
    assert len(_overrides(caplog)) == len(ours)


def test_the_plugin_directory_given_as_include_path_is_indexed_once(caplog):
    """The start-up hook adds the plugin's directory; `--include_path "$(lm-eval-ext tasks-dir)"` names it again."""
    from lm_eval.tasks import TaskManager

    from lm_eval_ext.paths import tasks_dir

    with caplog.at_level(logging.WARNING, logger="lm_eval.tasks._index"):
        manager = TaskManager(include_defaults=False, include_path=f"{tasks_dir()}/")
    assert set(PLUGIN_TASKS) <= set(manager.all_tasks)
    assert _overrides(caplog) == []


def test_a_harness_that_discovers_plugin_models_itself_registers_each_once(monkeypatch):
    import lm_eval.api.registry as registry
    import lm_eval.models

    from lm_eval_ext import boundary

    pr = _harness_pr()
    native = registry.Registry("model")
    monkeypatch.setattr(registry, "model_registry", native)
    monkeypatch.setattr(registry, "load_plugins", pr.load_plugins, raising=False)
    monkeypatch.setattr(registry, "import_plugins", pr.import_plugins, raising=False)
    boundary.on_harness_import("lm_eval.models", lm_eval.models)  # what the start-up hook does once it is imported
    assert list(native) == []  # left to the harness
    assert pr.load_plugins("lm_eval.models", native) == ["ext-replay"]
    assert native.get("ext-replay").__name__ == "ReplayLM"
    # a harness without it: the hook registers the same entry point, once however often it runs
    monkeypatch.delattr(registry, "load_plugins")
    older = registry.Registry("model")
    monkeypatch.setattr(registry, "model_registry", older)
    boundary.on_harness_import("lm_eval.models", lm_eval.models)
    boundary.activate()
    assert list(older) == ["ext-replay"] and older.get("ext-replay") is native.get("ext-replay")


def test_entry_points_are_declared():
    from importlib.metadata import distribution

    points = {(p.group, p.name): p.value for p in distribution("lm-eval-ext").entry_points}
    assert {key: value for key, value in points.items() if key[0].startswith("lm_eval.")} == {
        ("lm_eval.tasks", "lm_eval_ext"): "lm_eval_ext.tasks",  # #4015: the package holding the task YAMLs
        ("lm_eval.models", "ext-replay"): "lm_eval_ext.models.replay:ReplayLM",  # #4013: module:Class
    }
    # what the harness's task entry point resolves: the package's directory, holding the YAMLs
    found = importlib.util.find_spec("lm_eval_ext.tasks")
    folder = Path(found.submodule_search_locations[0])
    assert (folder / "lieder" / "lieder_base.yaml").is_file()


def test_every_task_yaml_declares_the_metrics_every_document_reports():
    """metric_list = what each document reports (the harness's loggers read every listed metric from each sample)."""
    from lm_eval_ext.boundary import task_index
    from lm_eval_ext.lieder.scoring import metric_names

    for name, entry in task_index(include_defaults=False).items():
        cfg = entry.config or {}
        if entry.kind != "task" or "task" not in cfg or "group" in cfg or isinstance(cfg.get("task"), list):
            continue
        listed = [m["metric"] for m in cfg.get("metric_list") or []]
        assert listed, f"{name} declares no metric_list"
        if name.startswith("lieder_"):
            stimulus_set = cfg["dataset_kwargs"]["stimulus_set"]
            assert listed == metric_names(stimulus_set, relative=stimulus_set != "two"), name
        assert "version" in (cfg.get("metadata") or {}), f"{name} has no metadata.version"


def test_the_wheel_holds_only_what_users_run(plugin_wheel):
    names = zipfile.ZipFile(plugin_wheel).namelist()
    (info,) = {n.split("/")[0] for n in names if n.split("/")[0].endswith(".dist-info")}
    assert {n.split("/")[0] for n in names} == {"lm_eval_ext", info, "lm_eval_ext_autoload.pth"}
    shipped = {n for n in names if n.endswith(".py")}
    source = {str(p.relative_to(ROOT)) for p in (ROOT / "lm_eval_ext").rglob("*.py")}
    tasks = {"lm_eval_ext/" + str(p.relative_to(ROOT)) for p in (ROOT / "tasks").rglob("*.py")}
    assert shipped == source | tasks  # the package's own modules and the task hooks, nothing of tests/
    assert sorted(n for n in shipped if n.startswith("lm_eval_ext/models/")) == [
        "lm_eval_ext/models/__init__.py", "lm_eval_ext/models/replay.py"]
    assert not [n for n in names if any(word in n for word in ("testing", "doubles", "scripted", "stub", "conftest"))]
    points = configparser.ConfigParser()
    points.optionxform = str
    points.read_string(zipfile.ZipFile(plugin_wheel).read(f"{info}/entry_points.txt").decode())
    assert {group: dict(points[group]) for group in points.sections()} == {
        "console_scripts": {"lm-eval-ext": "lm_eval_ext.cli:main"},
        "lm_eval.models": {"ext-replay": "lm_eval_ext.models.replay:ReplayLM"},
        "lm_eval.tasks": {"lm_eval_ext": "lm_eval_ext.tasks"},
    }
    assert not set(DOUBLES) & set(points["lm_eval.models"])


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
    """``python -m lm_eval validate --tasks ...`` in the venv of ``python``."""
    return run_cli([str(python), "-m", "lm_eval", "validate", "--tasks", ",".join(tasks)], timeout=600)


@pytest.mark.slow
@skip_where_broken("validate")
def test_install_then_uninstall_in_a_fresh_venv(tmp_path, run_cli, plugin_wheel, source_tree_builds):
    # processes of that venv's interpreter: the installed wheel, then an editable install, and the start-up hook.
    # One venv for both: each uninstall must leave the venv's files as they were before the first install.
    python = _fresh_venv(tmp_path)
    site = Path(subprocess.check_output([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                        text=True).strip())
    before = set(site.iterdir())
    # --ignore-installed: the fresh venv sees this venv's lm-eval-ext through its path entry, and pip would
    # take it as already installed (a non-editable install, as in CI)
    pip = [sys.executable, "-m", "pip", "--python", str(python)]
    for editable in (False, True):
        if editable:
            with source_tree_builds:
                proc = run_cli([*pip, "install", "--no-deps", "--ignore-installed", "--no-build-isolation", "-e",
                                str(ROOT)], timeout=300)
        else:
            proc = run_cli([*pip, "install", "--no-deps", "--ignore-installed", str(plugin_wheel)], timeout=300)
        assert proc.returncode == 0, (editable, proc.stderr)
        hook = (site / "lm_eval_ext_autoload.pth").read_text()
        assert hook.startswith("import sys; exec(") and hook.count("\n") == 1, editable  # one line, the hook's source
        # a Python start runs the hook and imports nothing of the plugin
        proc = run_cli([str(python), "-c", "import sys; print(sys.meta_path[0].__name__, "
                                           "sorted(m for m in sys.modules if m.startswith('lm_eval_ext')))"])
        assert proc.stdout.split() == ["LmEvalExtStartupHook", "[]"], (editable, proc.stdout + proc.stderr)
        proc = run_cli([str(python), "-c", "from importlib.metadata import entry_points; "
                                           "print(*sorted(e.name for e in entry_points(group='lm_eval.models')))"])
        assert proc.stdout.split() == ["ext-replay"], (editable, proc.stdout + proc.stderr)  # the one model users need
        proc = _validate(python, run_cli, "lieder_base", "elitr_bench_qa_dev_mt", "magnifico")
        assert proc.returncode == 0 and "All tasks found and valid" in proc.stdout, (editable, proc.stdout + proc.stderr)
        proc = run_cli([*pip, "uninstall", "-y", "lm-eval-ext"], timeout=300)
        assert proc.returncode == 0, (editable, proc.stderr)
        assert set(site.iterdir()) == before, f"pip uninstall left files behind (editable={editable})"
    proc = _validate(python, run_cli, "lieder_base")  # the venv as it was before the installs
    assert proc.returncode != 0 and "Tasks not found: lieder_base" in proc.stdout + proc.stderr


@pytest.mark.slow
@skip_where_broken("validate")
def test_plain_lm_eval_lists_and_validates_every_plugin_task(run_cli, plain_task_listing):
    proc = plain_task_listing  # lm_eval ls tasks
    assert proc.returncode == 0, proc.stderr
    table = proc.stdout.replace(" ", "")
    for name in PLUGIN_TASKS:
        assert f"|{name}|" in table, f"{name} is not listed by plain `lm_eval ls tasks`"
    proc = run_cli(["lm_eval", "validate", "--tasks", ",".join(PLUGIN_TASKS)])
    assert proc.returncode == 0 and "All tasks found and valid" in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.slow
def test_python_api_and_both_commands_give_the_same_numbers(run_cli, data_dir, tmp_path):
    import lm_eval
    from lm_eval.tasks import TaskManager

    table = tmp_path / "table.json"
    table.write_text(json.dumps({"entries": [], "default": -3.0}))
    api = lm_eval.simple_evaluate(model="ext-loglik-table", model_args={"table": str(table)}, tasks=["lieder_base"],
                                  task_manager=TaskManager(include_defaults=False))
    numbers = {}
    for command in (["lm_eval", "run"], ["lm-eval-ext", "run"]):
        out = tmp_path / command[0]
        proc = run_cli([*command, "--model", "ext-loglik-table", "--model_args", f"table={table}",
                        "--tasks", "lieder_base", "--output_path", str(out)])
        assert proc.returncode == 0, proc.stderr[-3000:]
        numbers[command[0]] = json.loads(next(out.rglob("results_*.json")).read_text())["results"]["lieder_base"]
    expected = {k: v for k, v in api["results"]["lieder_base"].items() if k not in ("name", "alias")}
    for got in numbers.values():
        for key, value in expected.items():
            assert got[key] == value or (isinstance(value, float) and math.isnan(value) and math.isnan(got[key])), key
    assert expected["acc,none"] == 0.0  # every pair ties at the default log-prob: a tie is wrong
