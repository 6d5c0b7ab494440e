"""MAGNIFICo's published numbers: Table 3, the only results the paper gives as numbers.

Patel et al. (EMNLP 2023), Table 3: relative performance of StarCoder and GPT-3.5-Turbo, plausible
and foreign forms, with the meaning given as a one-line description (the Description prompt) and
explained in a long conversation (Dialogue), over the 8 interpretations that have conversations.
Every other result of the paper (per prompt type, form, category, position, ...) is drawn as bar
charts only, so it is not here. Transcribed in ``tables/magnifico.csv``; rel_perf is in percent,
like our ``rel_perf``.

Our tasks: Dialogue is ``magnifico_dialogue_start_<form>`` (the authors' default conversations,
which explain the meaning near their start; those tasks have exactly the 8 interpretations);
Description is ``magnifico_description_<form>`` restricted to the same 8 interpretations (run it
with the ``--metadata`` option ``interpretations`` set to :data:`DIALOGUE_INTERPRETATIONS`).
"""
from __future__ import annotations

from .numbers import PublishedNumber, Source
from .tables import read_table

BENCHMARK = "magnifico"
CITATION = "Patel et al. (EMNLP 2023)"
DIALOGUE_INTERPRETATIONS = ("average", "city_mv_pa", "lname_fname", "maximum", "more_than_max", "salary_more_than",
                            "value_mode", "yellow_card")


def numbers() -> list[PublishedNumber]:
    """Table 3, as transcribed."""
    return [PublishedNumber(BENCHMARK, row["model"], row["task"], row["metric"], float(row["paper_percent"]),
                            Source(CITATION, row["source"]), row["note"]) for row in read_table(BENCHMARK)]
