"""The reusable position-sweep machinery (lm_eval_ext/sweeps.py), with hand-worked numbers."""
from __future__ import annotations

import math

import pytest
from lm_eval.api.metrics import mean

from lm_eval_ext import sweeps


def test_insert_and_move_keep_the_others_in_order():
    assert sweeps.insert_at(["a", "b", "c"], "G", 0) == ["G", "a", "b", "c"]
    assert sweeps.insert_at(["a", "b", "c"], "G", 2) == ["a", "b", "G", "c"]
    assert sweeps.insert_at(["a", "b", "c"], "G", 3) == ["a", "b", "c", "G"]
    # the authors' KV move: pop the queried pair, insert it at the index
    assert sweeps.move_to_index(["a", "b", "Q", "c", "d"], 2, 0) == ["Q", "a", "b", "c", "d"]
    assert sweeps.move_to_index(["a", "b", "Q", "c", "d"], 2, 4) == ["a", "b", "c", "d", "Q"]
    assert sweeps.move_to_index(["Q", "a", "b"], 0, 1) == ["a", "Q", "b"]


@pytest.mark.parametrize("index", [-1, 4])
def test_insert_rejects_positions_outside_the_list(index):
    with pytest.raises(ValueError, match="outside 0..3"):
        sweeps.insert_at(["a", "b", "c"], "G", index)


def test_position_names_are_one_based():
    assert sweeps.position_name(0) == "pos_1"
    assert sweeps.position_name(19) == "pos_20"
    assert sweeps.metric_names([0, 4, 9]) == ["acc", "acc_pos_1", "acc_pos_5", "acc_pos_10", "acc_gap", "acc_middle_drop"]
    assert sweeps.metric_names([0, 9]) == ["acc", "acc_pos_1", "acc_pos_10", "acc_gap"]  # no middle with two ends


# Positions 0, 4, 9 with correctness 1,1,1,0 | 1,0,0,0 | 1,1,0,0:
# accuracy by position 0.75, 0.25, 0.5; gap 0.75 - 0.25 = 0.5; middle drop (0.75 + 0.5) / 2 - 0.25 = 0.375.
PAIRS = [(0, 1), (0, 1), (0, 1), (0, 0), (4, 1), (4, 0), (4, 0), (4, 0), (9, 1), (9, 1), (9, 0), (9, 0)]


WITH_ENDS = [(position, correct, 0, 9) for position, correct in PAIRS]  # acc_middle_drop's per-document values


def test_gap_and_middle_drop_from_per_document_pairs():
    assert sweeps.accuracy_by_position(PAIRS) == {0: 0.75, 4: 0.25, 9: 0.5}
    assert sweeps.position_gap(PAIRS) == 0.5
    assert sweeps.middle_drop(WITH_ENDS) == 0.375


def test_a_middle_drop_without_an_end_of_the_sweep_is_undefined():
    """The ends are the sweep's, not the lowest and highest positions a run happened to score."""
    assert math.isnan(sweeps.middle_drop([item for item in WITH_ENDS if item[0] != 9]))  # no last position
    assert math.isnan(sweeps.middle_drop([item for item in WITH_ENDS if item[0] != 0]))  # no first position
    assert math.isnan(sweeps.middle_drop([item for item in WITH_ENDS if item[0] != 4]))  # nothing in between
    assert math.isnan(sweeps.middle_drop([]))
    # a sweep of 0, 4, 9, 14 scored at 0, 4, 9 only: not (0.75 + 0.5) / 2 - 0.25 over the wrong ends
    assert math.isnan(sweeps.middle_drop([(position, correct, 0, 14) for position, correct in PAIRS]))


def test_middle_drop_uses_the_minimum_strictly_inside_and_can_be_negative():
    # ends 0.2 and 0.4 (mean 0.3), inside 0.9 and 0.6 -> 0.3 - 0.6 = -0.3 (an inverted U)
    by_position = {0: 0.2, 4: 0.9, 9: 0.6, 14: 0.4}
    assert math.isclose(sweeps.middle_drop_of(by_position), -0.3)
    assert math.isclose(sweeps.gap(by_position), 0.7)
    with pytest.raises(ValueError, match="three positions"):
        sweeps.middle_drop_of({0: 1.0, 9: 0.0})
    with pytest.raises(ValueError, match="two positions"):
        sweeps.gap({0: 1.0})


def test_per_document_values_carry_only_their_own_position():
    values = sweeps.sweep_metrics(position=4, correct=True, positions=[0, 4, 9])
    assert values == {"acc": 1.0, "acc_pos_5": 1.0, "acc_gap": (4, 1.0), "acc_middle_drop": (4, 1.0, 0, 9)}
    assert "acc_pos_1" not in values  # no sentinel for the other positions
    assert sweeps.sweep_metrics(position=0, correct=0, positions=[0, 9], prefix="exec_acc") == {
        "exec_acc": 0.0, "exec_acc_pos_1": 0.0, "exec_acc_gap": (0, 0.0)}


def test_aggregations_and_directions():
    agg = sweeps.aggregations([0, 4, 9])
    assert agg["acc"] is mean and agg["acc_pos_5"] is mean
    assert agg["acc_gap"] is sweeps.position_gap and agg["acc_middle_drop"] is sweeps.middle_drop
    better = sweeps.higher_is_better([0, 4, 9])
    assert better["acc"] and better["acc_pos_10"] and not better["acc_gap"] and not better["acc_middle_drop"]
