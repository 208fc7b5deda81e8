"""A bisect's answer as text: the range, one line per step (its commit, verdict and the two intervals it
was called on), the final pair, the answer, and where the time went. The same document (the bisect's
result with its steps: :meth:`labctl.measure.bisect.BisectResult.to_dict`, or a stored bisect read back by
:func:`stored_document`) is ``labctl bisect --json`` and the bisect's HTML page."""

from __future__ import annotations

from typing import Any

from labctl.analysis.renderers import aligned


def stored_document(stored: dict[str, Any]) -> dict[str, Any]:
    """A bisect read from the store (:func:`labctl.results.bisects.bisect`) as the document of its answer;
    an unfinished one has no answer yet (``status`` running or aborted)."""
    result = dict(stored["info"].get("result") or {})
    if not result:
        result = {"bisect_id": stored["id"], "status": stored["status"], "profile": stored["profile_name"],
                  "recipe": stored["recipe"], "repo": stored["repo"], "good": stored["good"], "bad": stored["bad"],
                  "message": f"bisect {stored['id']} is {stored['status']}: run the same labctl bisect again to resume it",
                  **{k: stored["info"].get(k) for k in ("good_rev", "bad_rev", "metric", "threshold_pct", "budget",
                                                        "direction")}}
    result["steps"] = stored["steps"]
    return result


def _interval(state: dict[str, Any] | None) -> str:
    if not state or state.get("change_pct") is None:
        return "-" if not state else state.get("verdict", "open")
    return f"{state['change_pct']:+.1f}% [{state['low_pct']:+.1f}, {state['high_pct']:+.1f}]"


def _duration(seconds: float | None) -> str:
    if not seconds:
        return "0 s"
    minutes, secs = divmod(int(round(seconds)), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs} s"


def step_rows(doc: dict[str, Any]) -> list[list[str]]:
    rows = []
    for step in doc.get("steps", []):
        detail = step.get("detail") or {}
        if step["kind"] == "final":
            continue
        if step["kind"] == "skip":
            rows.append([str(step["position"]), step["sha"][:12], (detail.get("subject") or "")[:40], "skip (does not build)", "-", "-", "-", "-",
                         detail.get("log", "")])
            continue
        comparisons = detail.get("comparisons", {})
        rows.append([str(step["position"]), step["sha"][:12], (detail.get("subject") or "")[:40], step["verdict"],
                     _interval(comparisons.get("good")), _interval(comparisons.get("bad")), str(detail.get("trials", "-")),
                     _duration(detail.get("measure_s")), f"run {step['run_id']}" if step.get("run_id") else "-"])
    return rows


def render_bisect(doc: dict[str, Any]) -> str:
    """The bisect as text (``labctl bisect``'s output)."""
    metric = doc.get("metric") or "the run's rate"
    lines = [f"bisect {doc.get('bisect_id')} of {doc.get('profile')}: recipe {doc.get('recipe')} in {doc.get('repo')}, "
             f"good {str(doc.get('good'))[:12]} ({doc.get('good_rev')}) .. bad {str(doc.get('bad'))[:12]} "
             f"({doc.get('bad_rev')}), {len(doc.get('commits') or [])} commits along the first parents; {metric}, "
             f"threshold {doc.get('threshold_pct', 0):g}%, budget {doc.get('budget')}"
             + (f"; the change: bad is {doc['direction']} than good" if doc.get("direction") else "")]
    lines += [f"note: {n}" for n in doc.get("notes") or []]
    rows = step_rows(doc)
    if rows:
        lines += ["", aligned(["step", "commit", "subject", "verdict", "vs good", "vs bad", "trials", "measured",
                               "run / log"], rows)]
    final = next((s for s in doc.get("steps", []) if s["kind"] == "final"), None)
    if final is not None:
        state = final["detail"]["comparison"]
        confidence = f", confidence {state['confidence'] * 100:.2f}%" if state.get("confidence") and \
            state["verdict"] in ("better", "worse", "equivalent") else ""
        lines += ["", f"final pair (run {final['run_id']}): {final['sha'][:12]} against its parent "
                      f"{final['detail']['parent'][:12]}: {state['verdict']} {_interval(state)} after "
                      f"{state['trials']} trials{confidence}"]
    lines += ["", f"{doc.get('status')}: {doc.get('message')}"]
    if doc.get("wall_s") is not None:
        lines.append(f"took {_duration(doc.get('wall_s'))}: builds {_duration(doc.get('build_s'))}, measuring "
                     f"{_duration(doc.get('measure_s'))} in {doc.get('trials', 0)} trials"
                     + (" (resumed)" if doc.get("resumed") else ""))
    return "\n".join(lines)
