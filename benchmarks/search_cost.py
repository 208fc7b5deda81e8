"""What an NDR/PDR search costs: MLRsearch against a plain RFC 2544 binary search on the same lab.

Both searches run on one embedded lab (labgen as its host side), interleaved (mlrsearch, binary,
mlrsearch, binary, ...) so that the host's slow swings fall on both alike, at the same precision and
final trial duration. The default lab, ``domains/vnf.yaml``, saturates far below what labgen paces, so
its PDR is the lab's; on ``domains/quick.yaml`` the forwarder keeps up with labgen and all its loss is
this host's pauses. Prints one JSON document::

    {"mlrsearch": {"trial_seconds": ..., "trials": ..., "ndr_mpps": ..., "pdr_mpps": ...},
     "binary": {...}, "ratio": mlrsearch trial-seconds / binary trial-seconds, "rounds": [...], "host": ...}

The goal is MLRsearch at half or less of binary search's trial-seconds. Each search first calibrates
its maximum load (the highest labgen can pace, short trials): those seconds are the same work for both
and are reported apart (``calibration_seconds`` per round), not in ``trial_seconds``. This host is a 2-vCPU VM whose
vCPUs pause for milliseconds: the NDR (no loss at all) is set by those pauses on either lab.

``seconds_by_trial`` (per round) says where the seconds went: per role (calibration, warmup, search) and
intended trial duration, e.g. ``{"search 1s": 9.0, "search 5s": 90.0}``.

``short_trial_misses`` (per round and goal) counts the loads MLRsearch's short trials passed at or above a load
its final trials failed (:func:`labctl.measure.ndr.short_trial_misses`): MLRsearch's saving rests on short trials
predicting long ones, and where they do not (loss from the host's pauses, which grows with the trial's length)
its final trials search again and it costs about what binary search does.

``--mlr-final 1 --exceed-ratio 0`` runs MLRsearch CSIT's way instead: every trial 1 s, a load a lower
bound after --duration-sum (default --final) seconds of trials that all met the goal, an upper bound at
the first trial that did not. For the NDR (no loss at all) that is in principle the evidence of binary
search's one final trial (a 5 s trial loses nothing when none of its five seconds does), and a load that
loses costs one 1 s trial instead of 5 s. Measured on this host it was neither equivalent nor cheap
enough: five separate 1 s trials passed loads one 5 s trial failed, and the ratio was 0.53-0.88 (README).

    python benchmarks/search_cost.py [--rounds 2] [--final 5] [--initial 1] [--precision 0.01] [--duration-sum S]
                                     [--mlr-final S] [--exceed-ratio R] [--goals ndr,pdr] [--profile domains/vnf.yaml]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from labctl import signals  # noqa: E402
from labctl.errors import LabError  # noqa: E402
from labctl.lab.plan import derive  # noqa: E402
from labctl.measure.labs import LabSession  # noqa: E402
from labctl.measure.ndr import SearchSettings, find_ndr  # noqa: E402
from labctl.profile.knobs import flatten  # noqa: E402
from labctl.profile.load import load_profile  # noqa: E402
from labctl.results.record import TrialRecord  # noqa: E402


def add_seconds(spent: dict[str, float], record: TrialRecord) -> None:
    """Where a search's trial-seconds went: per role and intended trial duration ("search 5s": 45.0), from
    the records find_ndr hands over (calibration included, as it is stored)."""
    key = f"{record.details.get('role')} {record.details.get('intended_duration_s'):g}s"
    spent[key] = spent.get(key, 0.0) + float(record.details.get("intended_duration_s") or 0.0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="pairs of searches (mlrsearch then binary)")
    parser.add_argument("--final", type=float, default=5.0, help="final trial duration, seconds (MLRsearch starts "
                                                                 "at --initial; binary search runs every trial this long)")
    parser.add_argument("--initial", type=float, default=1.0,
                        help="MLRsearch's initial trial duration, seconds (capped at --final; binary search has none)")
    parser.add_argument("--precision", type=float, default=0.01, help="relative width of the answer")
    parser.add_argument("--duration-sum", type=float, default=None,
                        help="trial-seconds MLRsearch wants at a load before calling it a bound (default: --final, "
                             "the one final trial binary search's every step rests on: the same evidence)")
    parser.add_argument("--mlr-final", type=float, default=None,
                        help="MLRsearch's final trial duration, seconds (default: --final; shorter, with "
                             "--duration-sum, lets it reach a bound in several shorter trials)")
    parser.add_argument("--exceed-ratio", type=float, default=SearchSettings.exceed_ratio,
                        help="the share of MLRsearch's --duration-sum that may fail the goal at a lower bound "
                             f"(default {SearchSettings.exceed_ratio:g}, as labctl ndr; 0: none may)")
    parser.add_argument("--goals", default="ndr,pdr", help="the goals both searches look for: ndr,pdr (as labctl "
                                                          "ndr), ndr or pdr (where the seconds of each go)")
    parser.add_argument("--profile", type=Path, default=ROOT / "domains" / "vnf.yaml",
                        help="the lab (default: domains/vnf.yaml, a forwarder that saturates below the generator)")
    args = parser.parse_args()
    if not 1 <= args.rounds <= 20:
        print(f"search_cost: --rounds {args.rounds}: allowed 1..20", file=sys.stderr)
        return 2
    if args.initial < 0.1:
        print(f"search_cost: --initial {args.initial}: allowed 0.1 s or more (capped at --final)", file=sys.stderr)
        return 2
    mlr_final = args.mlr_final or args.final
    initial = min(args.initial, args.final, mlr_final)
    duration_sum = args.duration_sum or args.final
    goals = tuple(args.goals.split(","))
    # binary search's every step is one trial of --final; MLRsearch's final trials are --mlr-final long
    settings_of = {search: SearchSettings(search=search, precision=args.precision, initial_trial_s=initial,
                                          final_trial_s=final, duration_sum_s=duration_sum,
                                          exceed_ratio=args.exceed_ratio, goals=goals)
                   for search, final in (("mlrsearch", mlr_final), ("binary", args.final))}
    try:
        for settings in settings_of.values():
            settings.check()
    except LabError as exc:
        print(f"search_cost: {exc}", file=sys.stderr)
        return 2
    try:
        loaded = load_profile(args.profile, {"name": "bench-search", "workload.generator": "labgen",
                                             "workload.duration_s": args.final, "workload.warmup_s": 0.5})
    except LabError as exc:
        print(f"search_cost: {exc}", file=sys.stderr)
        return 2
    per_search: dict[str, list[dict]] = {"mlrsearch": [], "binary": []}
    rounds = []
    with signals.stoppable(), LabSession(loaded.profile.name) as session:
        base = TrialRecord(config=flatten(loaded.profile.model_dump()))
        lab = session.acquire(derive(loaded.profile), base.warnings)
        try:
            for number in range(args.rounds):
                for search in ("mlrsearch", "binary"):
                    settings = settings_of[search]
                    spent: dict[str, float] = {}
                    result = find_ndr(lab, base, settings, lambda record: add_seconds(spent, record), latency=False)
                    row = {"round": number, "search": search, "trial_seconds": round(result.trial_seconds, 2),
                           "trials": result.trials, "ndr_mpps": result.ndr.mpps, "pdr_mpps": result.pdr.mpps,
                           "calibration_seconds": result.calibration_seconds, "seconds_by_trial": spent,
                           "short_trial_misses": result.short_trial_misses,
                           "max_load_mpps": result.max_load_mpps,
                           "wall_s": round(result.wall_s, 1), "warnings": result.warnings}
                    per_search[search].append(row)
                    rounds.append(row)
        finally:
            session.release(lab, failed=True)

    def summary(rows: list[dict]) -> dict:
        def median(key: str):
            values = [r[key] for r in rows if r[key] is not None]
            return statistics.median(values) if values else None

        return {"trial_seconds": median("trial_seconds"), "trials": median("trials"), "ndr_mpps": median("ndr_mpps"),
                "pdr_mpps": median("pdr_mpps"), "searches": len(rows)}

    out = {"mlrsearch": summary(per_search["mlrsearch"]), "binary": summary(per_search["binary"]),
           "precision": args.precision, "final_trial_s": args.final,
           "initial_trial_s": initial, "mlrsearch_final_trial_s": mlr_final, "exceed_ratio": args.exceed_ratio,
           "goals": list(goals), "duration_sum_s": duration_sum, "rounds": rounds,
           "host": "a 2-vCPU VM with unsteady speed: the rates are this host's, the trial-seconds the point"}
    binary_s = out["binary"]["trial_seconds"]
    out["ratio"] = round(out["mlrsearch"]["trial_seconds"] / binary_s, 3) if binary_s else None
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
