"""A ``sweep --until decided`` course in words, written once for every face: the CLI's sweep and report, the
TUI's Sweep screen, ``advise`` (:mod:`advisor.verdicts`), ``compare --by`` and the HTML page say it alike.

A course is the dict :meth:`labctl.measure.until.Until.summary` returns and the run's info keeps
(``until``): why it stopped (``stop``), the looks and blocks, the metric, threshold and error, and one
state per comparison (:meth:`labctl.measure.until.State.to_dict`). This module only reads those dicts:
it imports nothing (no statistics, no store), so a face's start-up does not pay for it.
"""

from __future__ import annotations

from typing import Any

#: What a report or a comparison prints under the course's heading: its verdicts are the ones to read.
BLOCKED = ("The run was measured in blocks: its within-block verdict below is the one to read (the table above "
           "pools unpaired trials)")


def stop_text(course: dict[str, Any]) -> str:
    """Why a course stopped, in words."""
    stop = course.get("stop")
    if stop == "decided":
        return "every comparison decided"
    if stop == "out of reach":
        futility = course.get("futility")
        chance = f"; under {futility * 100:g}% chance of a verdict by its end" if futility is not None else ""
        return f"every open comparison out of reach of the budget ({course.get('budget')}{chance})"
    if stop == "failed":
        return "every trial of its last round failed (each error is in the run: labctl export --run N)"
    return f"budget ({course.get('budget')}) spent"


def course_text(course: dict[str, Any]) -> str:
    """The course in one line: why it stopped, what was judged against which band, the error spent over
    the looks taken (it ends there, so a page can close the sentence; the looks' own notes say the blocks)."""
    looks = course.get("looks") or 0
    return (f"{stop_text(course)}; {course.get('metric')}, within-block ratios, threshold "
            f"±{course.get('threshold_pct') or 0:g}%, error {course.get('alpha') or 0:g} spent over {looks} "
            f"look{'s' * (looks != 1)}")


def heading(course: dict[str, Any], run_id: int | None = None) -> str:
    """``until decided (run 4): every comparison decided; mpps, ...``: the line above the verdicts."""
    run = f" (run {run_id})" if run_id is not None else ""
    return f"until decided{run}: {course_text(course)}"


def describe_open(state: dict[str, Any]) -> str:
    """One line for a comparison still open when the budget ended: what it would take."""
    name = f"{state['knob']}: {state['candidate']} vs {state['baseline']}"
    seen = "" if state.get("change_pct") is None else \
        f" (seen {state['change_pct']:+.1f}% [{state['low_pct']:+.1f}, {state['high_pct']:+.1f}])"
    if state.get("out_of_reach"):
        chance = state.get("chance")
        name += (f" (given up after {state['trials']} trials: "
                 f"{'its chance' if chance is None else f'a {chance * 100:.1f}% chance'} of a verdict by the budget's end)")
    if state.get("needed_trials") is None:
        return f"{name}: open{seen}; the change sits on the threshold: no practical number of repeats will tell"
    more = state["needed_trials"]
    took = f", about {state['needed_s'] / 60:.1f} min" if state.get("needed_s") else ""
    return (f"{name}: open{seen}; the observed noise needs {state['needed_pairs']} pairs: {more} more trials{took}")


def describe(state: dict[str, Any]) -> str:
    """One line per comparison: verdict, trials, achieved confidence."""
    if state["verdict"] == "open":
        return describe_open(state)
    name = f"{state['knob']}: {state['candidate']} vs {state['baseline']}"
    if state["verdict"] == "refused":
        return f"{name}: refused ({state.get('reason', '')}) after {state['trials']} trials"
    return (f"{name}: {state['verdict']} {state['change_pct']:+.1f}% [{state['low_pct']:+.1f}, {state['high_pct']:+.1f}] "
            f"after {state['trials']} trials, confidence {state['confidence'] * 100:.2f}% "
            f"(look {state['looks']}, error spent across looks)")


def course_lines(course: dict[str, Any], run_id: int | None = None, knob: str | None = None,
                 note: str | None = None) -> list[str]:
    """The heading (with ``note`` after it), then one indented line per comparison (of ``knob`` only, when
    given); empty when no comparison is left to show."""
    states = [s for s in course.get("comparisons", []) if knob is None or s["knob"] == knob]
    if not states:
        return []
    head = heading(course, run_id) + (f". {note}" if note else "")
    return [head, *(f"  {describe(s)}" for s in states)]
