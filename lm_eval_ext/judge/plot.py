"""The per-gold-bin plot of judge validation: each scorer's mean score (95% CI) per gold-human score."""
from __future__ import annotations

import io


def plot_gold_bins(report: dict) -> bytes:
    """The PNG for ``report`` (from :func:`validate.validation_report`)."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 5), dpi=120)
    ax.plot([1, 10], [1, 10], linestyle=":", color="grey", label="gold human (identity)")
    scorers = [(name, entry) for name, entry in report["scorers"].items() if "by_gold_bin" in entry]
    for offset, (name, entry) in enumerate(scorers):
        bins = entry["by_gold_bin"]
        shift = (offset - (len(scorers) - 1) / 2) * 0.08  # side by side, so the intervals stay readable
        xs = [int(level) + shift for level in bins]
        means = [b["mean"] for b in bins.values()]
        lower = [b["mean"] - b.get("ci95_low", b["mean"]) for b in bins.values()]
        upper = [b.get("ci95_high", b["mean"]) - b["mean"] for b in bins.values()]
        ax.errorbar(xs, means, yerr=[lower, upper], marker="o", capsize=3, label=name)
    ax.set_xlabel("gold human score")
    ax.set_ylabel("mean score (95% CI)")
    ax.set_xticks(range(1, 11))
    ax.set_xlim(0.5, 10.5)
    ax.set_ylim(0, 10.5)
    ax.set_title(f"Judge scores per gold-human score ({report['n_items']} responses)")
    ax.legend(loc="lower right", fontsize="small")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return buffer.getvalue()
