"""The paper's seed protocol: one run per seed, then mean +- sample standard deviation per task and metric."""
from __future__ import annotations

import json
import math

import pytest

from doubles.stub_openai import StubOpenAIServer


def write_results(path, score, failures, pvalue):
    path.write_text(json.dumps({"results": {"elitr_bench_qa_test2_st": {
        "alias": "elitr_bench_qa_test2_st", "sample_len": 130, "score,judge": score, "score_stderr,judge": 0.1,
        "judge_failures,judge": failures, "middle_pvalue,judge": pvalue}}}))
    return path


def test_summary_by_hand(tmp_path):
    from lm_eval_ext.elitr.seed_summary import format_summary, summarize

    files = [write_results(tmp_path / f"results_{i}.json", s, f, p)
             for i, (s, f, p) in enumerate([(6.0, 0, 0.2), (7.0, 1, math.nan), (8.0, 2, 0.4)])]
    summary = summarize(files)["elitr_bench_qa_test2_st"]
    # scores 6, 7, 8: mean 7, sample variance ((1 + 0 + 1) / (3 - 1)) = 1
    assert summary["score"] == {"values": [6.0, 7.0, 8.0], "n": 3, "mean": 7.0, "std": 1.0}
    assert summary["judge_failures"]["mean"] == 1.0 and summary["judge_failures"]["std"] == 1.0
    # an undefined p-value is left out: mean of 0.2 and 0.4, sample std sqrt(0.02)
    assert summary["middle_pvalue"]["n"] == 2 and summary["middle_pvalue"]["mean"] == pytest.approx(0.3)
    assert summary["middle_pvalue"]["std"] == pytest.approx(math.sqrt(0.02))
    assert "score_stderr" not in summary and "sample_len" not in summary
    assert format_summary(summarize(files)).splitlines()[0].split() == [
        "elitr_bench_qa_test2_st", "score", "7.00", "+-", "1.00", "(n=3)"]


def test_api_models_get_the_seed_in_their_arguments(tmp_path):
    from lm_eval_ext.commands.seeds import seed_arguments

    api = ["--model", "local-chat-completions", "--model_args", "base_url=http://h/v1/chat/completions,model=m",
           "--tasks", "elitr_bench_qa_test2_st"]
    assert seed_arguments(api, 2024, "out")[len(api):] == ["--seed", "2024", "--output_path", "out/seed_2024",
                                                          "--model_args", "seed=2024"]
    hf = ["--model", "hf", "--model_args", "pretrained=x", "--tasks", "elitr_bench_qa_test2_st"]
    assert seed_arguments(hf, 2023, "out")[len(hf):] == ["--seed", "2023", "--output_path", "out/seed_2023"]
    # the model named only in the --config file, as the harness reads it
    config = tmp_path / "run.yaml"
    config.write_text("model: local-chat-completions\nmodel_args: {base_url: 'http://h/v1/chat/completions', model: m}\n")
    assert seed_arguments(["--config", str(config)], 2025, "out")[2:] == ["--seed", "2025", "--output_path",
                                                                         "out/seed_2025", "--model_args", "seed=2025"]


@pytest.mark.slow
def test_seed_runs_end_to_end(run_cli, data_dir, tmp_path):
    """Each run gets its seed (the judge is seeded with the run's seed: the stub scores 2023 as 4, 2024 as 7)."""
    key_env, responses = "LMX_SEEDS_KEY", tmp_path / "r.json"
    responses.write_text(json.dumps({"default": "an answer"}))

    def judge(request: dict) -> str:
        return {2023: "\\boxed{4}", 2024: "\\boxed{7}"}[request["seed"]]

    with StubOpenAIServer(responder=judge, models=()) as srv:
        proc = run_cli(["lm-eval-ext", "elitr", "seeds", "--seeds", "2023", "2024", "--json", "--",
                        "--model", "ext-canned-gen", "--model_args", f"responses={responses}",
                        "--tasks", "elitr_bench_qa_test2_st", "--limit", "2", "--output_path", str(tmp_path / "out"),
                        "--metadata", json.dumps({"judge_base_url": srv.base_url, "judge_api_key_env": key_env,
                                                 "judge_cache": "none"})],
                       env={key_env: "sk-seeds-test-key-0123456789abcdef"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert [run.split("/")[-3] for run in report["runs"]] == ["seed_2023", "seed_2024"]
    score = report["tasks"]["elitr_bench_qa_test2_st"]["score"]
    assert score["values"] == [4.0, 7.0] and score["mean"] == 5.5 and score["std"] == pytest.approx(math.sqrt(4.5))
    again = run_cli(["lm-eval-ext", "elitr", "seeds-report", str(tmp_path / "out" / "seed_2023"),
                     str(tmp_path / "out" / "seed_2024")])
    assert again.returncode == 0 and "5.50 +- 2.12  (n=2)" in again.stdout
