"""What the export needs to know about each benchmark: its tasks, headline metrics and data files.

Headline metrics are the ones the papers report (and the groups aggregate); the export
carries every metric anyway, under ``tasks.<task>.metrics``. A task's data files are
derived from its recorded config (``dataset_kwargs`` and the run's ``--metadata``).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

PROPERTIES = ("existence", "uniqueness", "plurality", "novelty")


@dataclass(frozen=True)
class DataFile:
    """A file a task read: a registered file of a dataset, or a file the user gave instead."""

    dataset: str
    path: str
    user_file: bool = False


@dataclass(frozen=True)
class Benchmark:
    """One benchmark: which tasks are its, which datasets they read, which metrics head the table."""

    key: str
    title: str
    datasets: tuple[str, ...]
    prefix: str  # of its task (and sub-group) names
    group: str  # its main group
    headline: Callable[[dict[str, float]], list[str]]  # the metrics, in table order, of those given
    files: Callable[[dict], list[DataFile]]

    def owns(self, task: str) -> bool:
        """True for the benchmark's tasks and groups."""
        return task == self.group or task.startswith(self.prefix)


def _kwargs(config: dict) -> dict:
    return config.get("dataset_kwargs") or {}


def _metadata(config: dict) -> dict:
    return config.get("metadata") or {}


def _lieder_headline(metrics: dict[str, float]) -> list[str]:
    names = ["acc", *(f"acc_{p}" for p in PROPERTIES), "acc_rel", *(f"acc_rel_{p}" for p in PROPERTIES)]
    return [name for name in names if name in metrics]


def _lieder_files(config: dict) -> list[DataFile]:
    if _metadata(config).get("stimuli_file"):
        return [DataFile("lieder", str(_metadata(config)["stimuli_file"]), user_file=True)]
    stimulus_set = _kwargs(config).get("stimulus_set")
    return [DataFile("lieder", f"stimuli/{stimulus_set}/{stimulus_set}_stimuli.jsonl")] if stimulus_set else []


def _litm_headline(metrics: dict[str, float]) -> list[str]:
    positions = sorted((name for name in metrics if name.startswith("acc_pos_")), key=lambda n: int(n.rsplit("_", 1)[1]))
    fixed = ("acc", "acc_gap", "acc_middle_drop", "prompts_skipped", "prompts_truncated")
    return [name for name in fixed if name in metrics] + positions


def _litm_files(config: dict) -> list[DataFile]:
    kwargs, metadata = _kwargs(config), _metadata(config)
    setting, k = kwargs.get("setting"), kwargs.get("k")
    if setting == "kv":
        if metadata.get("litm_kv_file"):
            return [DataFile("lost_in_the_middle", str(metadata["litm_kv_file"]), user_file=True)]
        # generated data has no file: the generator's seed and sizes are in the task's metadata
        return [] if kwargs.get("generated") else [DataFile("lost_in_the_middle", f"kv_retrieval_data/kv-retrieval-{k}_keys.jsonl.gz")]
    if metadata.get("litm_qa_file"):
        return [DataFile("lost_in_the_middle", str(metadata["litm_qa_file"]), user_file=True)]
    if setting == "qa":
        return [DataFile("lost_in_the_middle", f"qa_data/{k}_total_documents/nq-open-{k}_total_documents_gold_at_0.jsonl.gz")]
    return [DataFile("lost_in_the_middle", "qa_data/nq-open-oracle.jsonl.gz")] if setting in ("oracle", "closedbook") else []


def _magnifico_headline(metrics: dict[str, float]) -> list[str]:
    names = ("rel_perf", "ex", "ex_base", "em", "interp_left_out", "rel_perf_basic", "rel_perf_subquery", "rel_perf_value",
             "rel_perf_column")
    return [name for name in names if name in metrics]


def _magnifico_files(config: dict) -> list[DataFile]:
    # Hundreds of TSV and dialogue files: the dataset's registry digest identifies them (data.datasets).
    return []


def _elitr_headline(metrics: dict[str, float]) -> list[str]:
    names = ("score", "score_who", "score_what", "score_when", "score_howmany", "score_begin", "score_middle", "score_end",
             "score_several", "score_diff", "middle_pvalue", "judge_failures", "prompts_truncated")
    return [name for name in names if name in metrics]


def _elitr_files(config: dict) -> list[DataFile]:
    archive = "czech.zip" if _kwargs(config).get("language") == "cs" else "data.zip"
    return [DataFile("elitr_bench", archive)]


BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark("lieder", "LIEDER", ("lieder",), "lieder_", "lieder", _lieder_headline, _lieder_files),
    Benchmark("lost_in_the_middle", "Lost in the Middle", ("lost_in_the_middle",), "litm_", "lost_in_the_middle",
              _litm_headline, _litm_files),
    Benchmark("magnifico", "MAGNIFICo", ("magnifico", "spider"), "magnifico_", "magnifico", _magnifico_headline,
              _magnifico_files),
    Benchmark("elitr_bench", "ELITR-Bench", ("elitr_bench",), "elitr_bench_", "elitr_bench", _elitr_headline,
              _elitr_files),
)


def benchmark_of(task: str) -> Benchmark | None:
    """The benchmark a task or group belongs to (None for tasks that are not the plugin's)."""
    return next((b for b in BENCHMARKS if b.owns(task)), None)
