"""The ELITR-Bench paper's seed protocol: run the same evaluation with seeds 2023, 2024, 2025.

:func:`run_seeds` runs ``lm-eval-ext run`` once per seed (``--seed S``, results under
``<output_path>/seed_S``; API models also get ``seed=S`` in their model arguments, since the
harness's ``--seed`` does not reach the request); :mod:`lm_eval_ext.elitr.seed_summary` gives
the mean and sample standard deviation of their results.
"""
from __future__ import annotations

from pathlib import Path

from ..boundary import activate, api_model, parse_run_args, run_config
from ..elitr.seed_summary import PAPER_SEEDS, SeedRunError


def _config(run_args: list[str]):
    """The harness's configuration of the run (the flags merged over ``--config``'s YAML)."""
    try:
        return run_config(parse_run_args(run_args))
    except (ValueError, TypeError, FileNotFoundError) as err:
        raise SeedRunError(f"The run's flags are not valid: {err}. See `lm_eval run --help`.") from None


def seed_arguments(run_args: list[str], seed: int, output_path: str, config=None) -> list[str]:
    """The ``lm-eval-ext run`` arguments of one seed's run (``config``: the run's configuration, if already made)."""
    extra = ["--seed", str(seed), "--output_path", str(Path(output_path) / f"seed_{seed}")]
    from lm_eval.api.registry import get_model

    activate()
    if api_model(get_model((config or _config(run_args)).model)):
        extra += ["--model_args", f"seed={seed}"]
    return [*run_args, *extra]


def run_seeds(run_args: list[str], seeds=PAPER_SEEDS) -> list[Path]:
    """Run ``lm-eval-ext run RUN_ARGS`` once per seed; the results file of each run."""
    from .run import main as run_main

    if "--seed" in run_args:
        raise SeedRunError("Do not give --seed to `lm-eval-ext elitr seeds`: it sets one per run (--seeds).")
    config = _config(run_args)  # made once: with --config the harness prints it each time
    output_path = config.output_path
    if not output_path:
        raise SeedRunError("`lm-eval-ext elitr seeds` needs --output_path DIR among the run flags (or output_path in "
                           "the --config file): each seed's results go to DIR/seed_<seed>.")
    files = []
    for seed in seeds:
        run_main(seed_arguments(run_args, seed, output_path, config))
        found = sorted((Path(output_path) / f"seed_{seed}").rglob("results_*.json"), key=lambda p: p.stat().st_mtime)
        if not found:
            raise SeedRunError(f"The run with seed {seed} wrote no results file under {output_path}/seed_{seed}.")
        files.append(found[-1])
    return files
