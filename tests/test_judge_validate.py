"""`lm-eval-ext judge validate`: the published judges' numbers from the file, and a judge run on the stub.

Every expected number is computed here from the raw file, with hand-written statistics
(no scipy), independently of lm_eval_ext.judge.validate.
"""
from __future__ import annotations

import json
import math
import re
from collections import defaultdict

import pytest

from doubles.stub_openai import StubOpenAIServer

MEMBER = "generated-responses/elitr-bench-qa_test2_st_all-eval.json"
KEY_ENV = "LMX_TEST_JUDGE_KEY"


def _raw_rows():
    from lm_eval_ext.data import read_zip_member

    data = json.loads(read_zip_member("elitr_bench", "generated-responses.zip", MEMBER, password=b"utter"))
    return [
        {"question": q["question"], "reference": q["groundtruth-answer"], **answer}
        for meeting in data["meetings"] for q in meeting["questions"] for answer in q["generated-responses"]
    ]


def _pearson(xs, ys):
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    return sxy / math.sqrt(sum((x - mx) ** 2 for x in xs) * sum((y - my) ** 2 for y in ys))


def _ranks(values):
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1  # ties share their mean rank
        i = j + 1
    return ranks


def _spearman(xs, ys):
    return _pearson(_ranks(xs), _ranks(ys))


def _kendall_tau_b(xs, ys):
    concordant = discordant = ties_x = ties_y = 0
    n = len(xs)
    for i in range(n):
        for j in range(i + 1, n):
            dx, dy = xs[i] - xs[j], ys[i] - ys[j]
            ties_x += dx == 0
            ties_y += dy == 0
            if dx and dy:
                concordant += (dx > 0) == (dy > 0)
                discordant += (dx > 0) != (dy > 0)
    pairs = n * (n - 1) / 2
    return (concordant - discordant) / math.sqrt((pairs - ties_x) * (pairs - ties_y))


def _expected(rows, column):
    """Means per model and correlations for score column ``column`` (a function of the row or None)."""
    scored = [(column(r), r) for r in rows if column(r) is not None]
    by_model = defaultdict(list)
    for score, row in scored:
        by_model[row["model"]].append(score)
    gold = [float(r["gold-human-eval_score"]) for _, r in scored]
    silver = [float(r["silver-human-eval_score"]) for _, r in scored]
    xs = [s for s, _ in scored]
    return {
        "mean_by_model": {m: sum(v) / len(v) for m, v in by_model.items()},
        "gold": (_pearson(xs, gold), _spearman(xs, gold), _kendall_tau_b(xs, gold)),
        "silver": (_pearson(xs, silver), _spearman(xs, silver), _kendall_tau_b(xs, silver)),
        "n": len(xs),
    }


def _check_scorer(entry, expected, with_silver=True):
    assert entry["mean_by_model"] == pytest.approx(expected["mean_by_model"], abs=1e-12)
    assert entry["vs_gold"]["n"] == expected["n"]
    got = (entry["vs_gold"]["pearson"], entry["vs_gold"]["spearman"], entry["vs_gold"]["kendall"])
    assert got == pytest.approx(expected["gold"], abs=1e-9)
    if with_silver:
        got = (entry["vs_silver"]["pearson"], entry["vs_silver"]["spearman"], entry["vs_silver"]["kendall"])
        assert got == pytest.approx(expected["silver"], abs=1e-9)


def _column(name):
    return lambda row: float(row[f"{name}-eval_score"])


def test_from_file_reproduces_the_files_numbers(data_dir, run_cli, tmp_path):
    proc = run_cli(["lm-eval-ext", "judge", "validate", "--from-file", "--json", "--output-dir", str(tmp_path / "v")])
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    rows = _raw_rows()
    assert report["n_items"] == len(rows) == 390
    assert report["models"] == ["GPT-4", "LongAlpaca-7B", "Vicuna-13B-v1.5"]
    assert list(report["scorers"]) == ["gpt-4", "prometheus", "silver-human", "gold-human"]
    for name in ("gpt-4", "prometheus"):
        _check_scorer(report["scorers"][name], _expected(rows, _column(name)))
    _check_scorer(report["scorers"]["silver-human"], _expected(rows, _column("silver-human")), with_silver=False)
    gold = report["scorers"]["gold-human"]
    assert gold["mean_by_model"] == pytest.approx(_expected(rows, _column("gold-human"))["mean_by_model"], abs=1e-12)
    assert "vs_gold" not in gold
    # the published GPT-4 judge: rounded as the terminal shows it
    assert round(report["scorers"]["gpt-4"]["vs_gold"]["pearson"], 3) == 0.820
    assert "gpt-4" in proc.stderr and "Correlation with human scores" in proc.stderr
    # per gold bin: bin 4 of the GPT-4 judge by hand (mean and 95% t interval)
    bin4 = [float(r["gpt-4-eval_score"]) for r in rows if r["gold-human-eval_score"] == "4"]
    cell = report["scorers"]["gpt-4"]["by_gold_bin"]["4"]
    mean = sum(bin4) / len(bin4)
    sd = math.sqrt(sum((x - mean) ** 2 for x in bin4) / (len(bin4) - 1))
    t_975_df4 = 2.7764451051977987  # Student t quantile, 4 degrees of freedom
    assert cell["n"] == len(bin4) == 5
    assert (cell["mean"], cell["ci95_low"], cell["ci95_high"]) == pytest.approx(
        (mean, mean - t_975_df4 * sd / math.sqrt(5), mean + t_975_df4 * sd / math.sqrt(5)), abs=1e-9)
    files = report["files"]
    assert json.loads((tmp_path / "v" / "validation.json").read_text()) == report
    assert (tmp_path / "v" / "gold_bins.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = (tmp_path / "v" / "correlations.csv").read_text().splitlines()
    assert table[0].startswith("scorer,kind,n_scored,n_failures,mean,") and len(table) == 5
    assert set(files) == {"correlations", "gold_bins", "plot", "json"}


def _gpt4_judge(rows):
    """A stub judge that gives every response its published GPT-4 score, except gold-4 ones: no score."""
    verdicts = {}
    for row in rows:
        key = (row["question"].strip(), row["generated-response"].strip())
        verdicts[key] = "no verdict" if row["gold-human-eval_score"] == "4" else f"\\boxed{{{row['gpt-4-eval_score']}}}"

    def respond(request):
        prompt = request["messages"][-1]["content"]
        question = re.search(r"### Question:\n(.*?)\n\n### Response to evaluate:\n", prompt, re.S).group(1)
        response = re.search(r"### Response to evaluate:\n(.*?)\n\n### Reference answer", prompt, re.S).group(1)
        return verdicts[(question, response)]

    return respond


def test_judge_run_against_stub(data_dir, tmp_path, monkeypatch, capsys):
    from lm_eval_ext.cli import main

    monkeypatch.setenv(KEY_ENV, "sk-test")
    rows = _raw_rows()
    common = ["judge", "validate", "--json", "--output-dir", str(tmp_path / "v"), "--judge-api-key-env", KEY_ENV,
              "--judge-cache", str(tmp_path / "cache.sqlite"), "--judge-concurrency", "16", "--judge-reasks", "1",
              "--judge-model", "stub-gpt4"]
    with StubOpenAIServer(responder=_gpt4_judge(rows)) as srv:
        with pytest.raises(SystemExit) as exit_code:
            main([*common, "--judge-base-url", srv.base_url, "--dry-run"])
        assert exit_code.value.code == 0 and srv.call_count == 0
        assert "389 need a judge call" in capsys.readouterr().err  # 390 responses, one duplicate prompt
        with pytest.raises(SystemExit) as exit_code:
            main([*common, "--judge-base-url", srv.base_url])
        assert exit_code.value.code == 0
        # 389 distinct prompts; the 5 gold-4 responses are asked twice (--judge-reasks 1)
        assert srv.call_count == 389 + 5
        tokens = _stub_tokens(srv, _gpt4_judge(rows))
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    # per 1,000 items: the tokens the stub reported, over the 389 items judged by calls (the duplicate prompt cost
    # nothing); no prices, so no dollars, and the summary says which options give them
    per = report["per_1000_items"]
    expected = {"prompt_tokens": round(tokens[0] * 1000 / 389), "completion_tokens": round(tokens[1] * 1000 / 389)}
    assert {k: per[k] for k in ("items", "concurrency", "batch", "prompt_tokens", "completion_tokens")} == {
        "items": 389, "concurrency": 16, "batch": False, **expected}
    assert "cost_usd" not in per and isinstance(per["seconds"], float) and isinstance(per["seconds_total"], float)
    assert (f"per 1,000 items: {expected['prompt_tokens']:,} input / {expected['completion_tokens']:,} output tokens, "
            f"{per['seconds']:,.1f} s at concurrency 16; the price needs the judge model's prices: --judge-price-input "
            "DOLLARS and --judge-price-output DOLLARS (per million input/output tokens)") in captured.err
    assert json.loads((tmp_path / "v" / "validation.json").read_text())["per_1000_items"] == per
    judge = report["scorers"]["judge"]
    assert judge["kind"] == "judge under test" and judge["n_failures"] == 5 and judge["n_scored"] == 385
    expected = _expected(rows, lambda r: None if r["gold-human-eval_score"] == "4" else float(r["gpt-4-eval_score"]))
    _check_scorer(judge, expected)
    assert "4" not in judge["by_gold_bin"]  # every gold-4 response was a judge failure
    assert report["judge"]["model"] == "stub-gpt4" and report["judge"]["run"]["failures"] == {"unparseable": 5}
    assert list(report["scorers"]) == ["judge", "gpt-4", "prometheus", "silver-human", "gold-human"]


def _stub_tokens(srv, respond) -> tuple[int, int]:
    """The input and output tokens the stub reported over its chat requests: ~4 characters per token of the
    message contents, and of the reply."""
    bodies = [r["body"] for r in srv.requests if r["path"] == "/v1/chat/completions"]
    prompt = sum(math.ceil(len(" ".join(m["content"] for m in body["messages"])) / 4) for body in bodies)
    return prompt, sum(math.ceil(len(respond(body)) / 4) for body in bodies)


def test_judge_validate_states_price_per_1000_items(data_dir, tmp_path, monkeypatch, capsys):
    """With prices, the dollars of 1,000 items at full price and with the batch discount; a run the cache answered
    says there is nothing to measure and how to measure."""
    from lm_eval_ext.cli import main

    monkeypatch.setenv(KEY_ENV, "sk-test")
    rows = _raw_rows()
    respond = _gpt4_judge(rows)
    args = ["judge", "validate", "--json", "--output-dir", str(tmp_path / "v"), "--judge-api-key-env", KEY_ENV,
            "--judge-cache", str(tmp_path / "cache.sqlite"), "--judge-concurrency", "16", "--judge-reasks", "0",
            "--judge-model", "stub-gpt4", "--judge-price-input", "2.5", "--judge-price-output", "10"]
    with StubOpenAIServer(responder=respond) as srv:
        with pytest.raises(SystemExit) as exit_code:
            main([*args, "--judge-base-url", srv.base_url])
        assert exit_code.value.code == 0 and srv.call_count == 389
        prompt, completion = _stub_tokens(srv, respond)
        captured = capsys.readouterr()
        with pytest.raises(SystemExit) as exit_code:
            main([*args, "--judge-base-url", srv.base_url])  # again: the cache answers every item
        assert exit_code.value.code == 0 and srv.call_count == 389
    per = json.loads(captured.out)["per_1000_items"]
    prompt, completion = prompt * 1000 / 389, completion * 1000 / 389
    full = (prompt * 2.5 + completion * 10) / 1e6
    assert (per["prompt_tokens"], per["completion_tokens"]) == (round(prompt), round(completion))
    assert (per["cost_usd"], per["batch_cost_usd"]) == (round(full, 6), round(full * 0.5, 6))
    assert (f"per 1,000 items: {round(prompt):,} input / {round(completion):,} output tokens, ${full:,.2f} at the "
            f"given prices (${full * 0.5:,.2f} with batch discount), {per['seconds']:,.1f} s at concurrency 16\n"
            ) in captured.err
    rerun = capsys.readouterr()
    assert json.loads(rerun.out)["per_1000_items"]["items"] == 0
    assert ("per 1,000 items: no figures, every verdict came from the judge's cache (nothing was spent); run with "
            "--judge-cache none to measure tokens, price and time") in rerun.err


def test_unreachable_judge_is_one_paragraph(data_dir, run_cli, tmp_path):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = run_cli(["lm-eval-ext", "judge", "validate", "--judge-base-url", f"http://127.0.0.1:{port}/v1",
                    "--judge-cache", "none", "--judge-retries", "1",
                    "--output-dir", str(tmp_path / "v")], env={"OPENAI_API_KEY": "sk-test"})
    assert proc.returncode == 2
    assert proc.stderr.count("error:") == 1 and "Traceback" not in proc.stderr
    assert "could not be used: cannot connect to 127.0.0.1" in proc.stderr


def test_a_spending_cap_below_the_calls_needed_stops_before_any_call(data_dir, run_cli, tmp_path):
    """The advice names this command's own flags (it has no --limit)."""
    proc = run_cli(["lm-eval-ext", "judge", "validate", "--judge-base-url", "http://127.0.0.1:9/v1",
                    "--judge-max-calls", "4", "--judge-cache", "none", "--output-dir", str(tmp_path / "v")],
                   env={"OPENAI_API_KEY": "sk-test"})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.endswith(
        "lm-eval-ext: error: The judge validation run needs at least 389 judge calls (0 of 389 prompts are cached), "
        "more than the cap of 4. Nothing was called. Raise the cap (--judge-max-calls N), or check the count first "
        "with the dry run (--dry-run).\n")


def test_missing_key_is_one_paragraph(data_dir, run_cli, tmp_path):
    proc = run_cli(["lm-eval-ext", "judge", "validate", "--judge-api-key-env", "LMX_NO_SUCH_KEY",
                    "--judge-cache", "none", "--output-dir", str(tmp_path / "v")])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "environment variable LMX_NO_SUCH_KEY, which is not set" in proc.stderr
    assert "name another variable with --judge-api-key-env NAME" in proc.stderr  # this command's own flag
