"""Packaging for lm-eval-ext (see docs/dependencies.md for why each dependency is here)."""
import ast
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).parent
# The start-up hook that lets a plain `lm_eval` find the plugin (lm_eval_ext/startup_hook.py); it
# sits at the top of site-packages, so `pip uninstall` removes it with the rest (RECORD).
PTH_NAME = "lm_eval_ext_autoload.pth"


def pth_line() -> str:
    """The hook's source as one `.pth` line: Python runs a line that starts with `import` at every start, and
    running the source there imports nothing of the plugin (an `import lm_eval_ext...` line would)."""
    tree = ast.parse((ROOT / "lm_eval_ext" / "startup_hook.py").read_text(encoding="utf-8"))
    for node in (tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.ClassDef, ast.FunctionDef)))):
        if ast.get_docstring(node) is not None:  # docstrings cost compile time at every start, and say nothing there
            node.body = node.body[1:]
    return f"import sys; exec({ast.unparse(tree)!r}, {{'__name__': 'lm_eval_ext_startup_hook'}})\n"


def _version() -> str:
    for line in (ROOT / "lm_eval_ext" / "__init__.py").read_text().splitlines():
        if line.startswith("__version__"):
            return line.split("=", 1)[1].strip().strip('"')
    raise RuntimeError("lm_eval_ext/__init__.py has no __version__")


def _package_files(folder: str) -> list[str]:
    """Files under a top-level folder, as paths relative to the package dir.

    tasks/ and templates/ live at the repository top but are shipped inside the wheel as
    lm_eval_ext/tasks and lm_eval_ext/templates.
    """
    return [str(p.relative_to(ROOT / folder)) for p in (ROOT / folder).rglob("*") if p.is_file() and "__pycache__" not in p.parts]


class BuildPyWithStartupHook(build_py):
    """build_py, plus the start-up hook's .pth file at the top of the wheel (editable installs too)."""

    def run(self):
        super().run()
        # An editable install links the packages and installs only what lands in its wheel
        # directory (the install command's install_lib); a wheel takes build_lib as it is.
        top = self.get_finalized_command("install").install_lib if self.editable_mode else self.build_lib
        Path(top).mkdir(parents=True, exist_ok=True)
        (Path(top) / PTH_NAME).write_text(pth_line(), encoding="utf-8")


setup(
    name="lm-eval-ext",
    version=_version(),
    description="LIEDER, Lost in the Middle, MAGNIFICo and ELITR-Bench for EleutherAI's lm-evaluation-harness",
    long_description=(ROOT / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=find_packages(include=["lm_eval_ext", "lm_eval_ext.*"]) + ["lm_eval_ext.tasks", "lm_eval_ext.templates"],
    package_dir={"lm_eval_ext.tasks": "tasks", "lm_eval_ext.templates": "templates"},
    package_data={
        "lm_eval_ext.tasks": _package_files("tasks"),
        "lm_eval_ext.templates": _package_files("templates"),
        "lm_eval_ext.data": ["manifest.json"],
        "lm_eval_ext.export": ["schema/*.json"],
        "lm_eval_ext.published": ["tables/*.csv"],
        "lm_eval_ext.leaderboard": ["assets/*"],
    },
    include_package_data=False,
    install_requires=[
        # the newest 0.4 is tested fully, 0.4.12 and the 0.5 pre-release (pip install --pre) by a smoke run;
        # lm_eval_ext/boundary.py detects what differs between them and lists the internals checked on each
        "lm-eval>=0.4.12,<0.6",
        "datasets>=2.16",
        "numpy",
        "tqdm>=4.59",
        "pyyaml",
        "pooch>=1.8",
        "requests>=2.28",
        "regex",
        "sqlparse>=0.4",
        "scipy>=1.10",
        "matplotlib>=3.7",
        "jsonschema>=4.18",
        "jinja2>=3.1",
    ],
    extras_require={
        "hf": ["lm-eval[hf]>=0.4.12,<0.6", "transformers>=4.45"],
        "api": ["lm-eval[api]>=0.4.12,<0.6", "openai>=3.0", "httpx2>=2.7"],
        "vllm": ["lm-eval[vllm]>=0.4.12,<0.6"],
        "dev": [
            "lm-eval[hf,api]>=0.4.12,<0.6",
            "transformers>=4.45",
            "tokenizers",
            "openai>=3.0",
            "httpx2>=2.7",
            # below 9.2: with pytest 9.2, pytest-xdist's --dist loadgroup stops grouping without a word
            # (pytest-dev/pytest-xdist#1386), and each worker builds a module's expensive fixture again
            "pytest>=8,<9.2",
            "pytest-xdist>=3.6",  # the suite runs on every core (pyproject.toml's addopts)
            "playwright",
            "wandb",  # the harness's W&B logger, run offline by the tests
            "build",  # the sdist and the wheel, built as the release workflow builds them (tests/test_packaging.py)
            "twine",  # their check, as the release workflow checks them
            "setuptools>=70.1",  # the build backend, for the tests' builds without isolation (it makes wheels itself)
            "pyflakes",  # no undefined name, no unused import in the code (tests/test_pyflakes.py)
        ],
    },
    cmdclass={"build_py": BuildPyWithStartupHook},
    entry_points={
        "console_scripts": ["lm-eval-ext=lm_eval_ext.cli:main"],
        # The groups and value forms of the harness's entry-point plugins (EleutherAI/lm-evaluation-harness
        # #4015: the package holding task YAMLs; #4013: name = "module:Class", imported only when a run names
        # it). A harness that reads them itself makes the start-up hook step aside. The test doubles are no
        # entry points: the test suite registers them (tests/doubles).
        "lm_eval.tasks": ["lm_eval_ext=lm_eval_ext.tasks"],
        "lm_eval.models": ["ext-replay=lm_eval_ext.models.replay:ReplayLM"],  # lm-eval-ext resume
    },
)
