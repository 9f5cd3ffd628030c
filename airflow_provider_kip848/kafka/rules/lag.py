"""When a group's lag means "caught up" on a live application: the rules of the lag wait, without I/O.

A group that consumes a topic somebody keeps writing to never sits at lag 0:
between two commits the log grows, so a wait for "total lag <= 0" on a live
application waits for its deadline although the migration succeeded. The lag
that means "caught up" is the lag the application had *before* the change, or a
lag that no longer grows while the group commits. Three rules, each stated in
the verdict it gives:

``max_lag`` (the absolute override)
    total lag <= ``max_lag`` (and each partition <= ``max_partition_lag`` when given): the old rule, for a
    deliberate threshold (``0`` on a topic nobody writes to during the change).

``baseline`` (needs the lag before the change, from the run's own offsets snapshot)
    every partition's lag now is at most its lag before plus the margin, and so is the total
    (:meth:`LagMargin.allowance`: ``before + floor(fraction * before) + records``); and the group committed,
    since the wait's oldest sample, on every partition whose log end moved (records arriving). A partition
    that had no commit before has a lag before of 0 (its allowance is ``records``).

``not_growing`` (needs a window of samples: the fallback when there is no baseline)
    over at least ``window_s`` seconds (the oldest sample kept and now): on every partition whose log end
    moved, the committed offset moved too and the lag did not grow by more than the margin of its lag at
    the window's start; on every partition whose log end did not move (nobody writes to it), the lag is 0,
    or within its baseline allowance when there is a baseline. A consumer that stopped keeps its committed
    offsets: with records arriving it never passes (no commit), without records arriving it passes only at
    lag 0 or at its lag before the change (the baseline rule would pass it too).

A lag that cannot be known is never "caught up": a partition with records and no commit, a group that does
not exist (the reader raises), offsets that cannot be read (the poll fails), or a partition the window's
first sample did not hold. The baseline rule also needs two samples, so that a dead consumer whose lag
happens to sit within its allowance fails the progress check instead of passing on the first look.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_kip848.kafka.errors import InvalidArgument
from airflow_provider_kip848.kafka.model import GroupOffsets, OffsetSnapshot

#: default margin over the lag before the change: half of it plus 100 records (a partition's lag between
#: two auto-commits of a live consumer, 5 s apart, is its write rate times 5 s; the snapshot saw one moment)
MARGIN_FRACTION = 0.5
MARGIN_RECORDS = 100
#: default window of the not-growing rule: six polls at the DAGs' default 5 s, one auto-commit interval
#: (5 s) several times over, so that a live consumer has committed on every partition it reads
WINDOW_SECONDS = 30.0

RULES = ("max_lag", "baseline", "not_growing")

#: a sample of one partition: [committed (None: no commit), log end, log start (None: unknown)]
Sample = dict[str, list[int | None]]


@dataclass(frozen=True)
class LagMargin:
    """How much lag above a reference still counts as the same level: ``fraction`` of it plus ``records``."""

    fraction: float = MARGIN_FRACTION
    records: int = MARGIN_RECORDS

    def __post_init__(self) -> None:
        if isinstance(self.fraction, bool) or not isinstance(self.fraction, (int, float)) or self.fraction < 0:
            raise InvalidArgument(f"the lag margin's fraction must be a number >= 0, not {self.fraction!r}",
                                  remedy="Pass e.g. 0.5 (half the lag before the change).")
        if isinstance(self.records, bool) or not isinstance(self.records, int) or self.records < 0:
            raise InvalidArgument(f"the lag margin's records must be a whole number >= 0, not {self.records!r}",
                                  remedy="Pass e.g. 100.")

    def allowance(self, before: int) -> int:
        """The most lag that is still "the level before": ``before + floor(fraction * before) + records``."""
        return before + int(self.fraction * before) + self.records

    def describe(self) -> str:
        return f"{self.fraction:g} x the lag before + {self.records} record(s)"


def baseline_from_snapshot(snapshot: OffsetSnapshot) -> dict[str, int | None]:
    """Each partition's lag in ``snapshot`` (``"topic:partition"``: log end - committed; None where it had no
    commit or no log end: unknown, so its allowance is the margin's records alone)."""
    return {f"{p.topic}:{p.partition}": p.lag for p in snapshot.partitions}


def sample_of(offsets: GroupOffsets) -> Sample:
    """What one poll saw of every partition: its committed offset and its log end."""
    return {f"{p.topic}:{p.partition}": [p.committed, p.log_end, p.log_start] for p in offsets.partitions}


def lag_of(entry: list[int | None] | None) -> int | None:
    """A sampled partition's lag: None when unknown (no commit on a log holding records, no log end); 0 for a
    partition without a commit whose log holds nothing (log end at its log start)."""
    if entry is None:
        return None
    committed, log_end = entry[0], entry[1]
    if log_end is None:
        return None
    if committed is None:
        log_start = entry[2] if len(entry) > 2 else None
        return 0 if log_end <= (log_start or 0) else None
    return max(log_end - committed, 0)


@dataclass(frozen=True)
class LagVerdict:
    """Whether the lag means caught up, by which ``rule`` (None: not met), and why, in words and as data."""

    met: bool
    rule: str | None
    summary: str
    detail: dict[str, Any] = field(default_factory=dict)  # Any: JSON of several shapes


def _tp_list(names: list[str], limit: int = 5) -> str:
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def judge_caught_up(now_at: float, now: Sample, samples: list[dict[str, Any]], *,
                    # Any: JSON of several shapes (XCom, reports)
                    baseline: Mapping[str, int | None] | None, margin: LagMargin, window_s: float,
                    max_partition_lag: int | None = None, unknown_in_offsets: list[str] | None = None) -> LagVerdict:
    """The baseline rule, else the not-growing rule, over the poll ``now`` (taken at ``now_at``) and the
    earlier ``samples`` (``{"at": epoch s, "offsets": Sample}``, oldest first, ``now`` not among them: the
    oldest is the reference of both rules). ``unknown_in_offsets``: partitions the offsets reader already
    called unknown (records and no commit). ``max_partition_lag``: a cap every rule also keeps."""
    lags = {tp: lag_of(entry) for tp, entry in now.items()}
    total = sum(v for v in lags.values() if v is not None)
    worst = max((v for v in lags.values() if v is not None), default=0)
    unknown = sorted(set(unknown_in_offsets or []) | {tp for tp, v in lags.items() if v is None})
    detail: dict[str, Any] = {"rule": None, "total_lag": total, "max_partition_lag": worst, "lag": lags,
                              "uncommitted": unknown, "margin": {"fraction": margin.fraction,
                                                                 "records": margin.records},
                              "window_s": window_s, "samples": len(samples) + 1}
    head = f"total lag {total}, worst partition {worst}"
    if unknown:
        return LagVerdict(False, None, f"{head}; lag unknown on {len(unknown)} partition(s) with records and no "
                                       f"commit yet ({_tp_list(unknown)}): not caught up", detail)
    capped = ([tp for tp, v in lags.items() if v is not None and v > max_partition_lag]
              if max_partition_lag is not None else [])
    if capped:
        return LagVerdict(False, None, f"{head}; above the per-partition cap {max_partition_lag} on "
                                       f"{_tp_list(sorted(capped))}", detail)
    reasons: list[str] = []
    if baseline is not None:
        verdict = _baseline_rule(now, lags, total, samples, baseline, margin, detail)
        if verdict.met:
            return LagVerdict(True, "baseline", f"{head}; caught up by the baseline rule: {verdict.summary}",
                              {**detail, "rule": "baseline"})
        reasons.append(f"baseline rule: {verdict.summary}")
    verdict = _not_growing_rule(now_at, now, lags, samples, baseline, margin, window_s, detail)
    if verdict.met:
        return LagVerdict(True, "not_growing", f"{head}; caught up by the not-growing rule: {verdict.summary}",
                          {**detail, "rule": "not_growing"})
    reasons.append(f"not-growing rule: {verdict.summary}")
    return LagVerdict(False, None, f"{head}; " + "; ".join(reasons), detail)


def _arrived(now: list[int | None], was: list[int | None]) -> bool:
    """Whether records arrived on a partition between two samples (its log end moved)."""
    end_now, end_was = now[1], was[1]
    return end_now is not None and end_was is not None and end_now > end_was


def _stalled(now: Sample, reference: Sample) -> list[str]:
    """Partitions whose log end moved since ``reference`` (records arrived) while the committed offset did not."""
    out = []
    for tp, entry in now.items():
        committed, log_end, was = entry[0], entry[1], reference.get(tp)
        if was is None or log_end is None or was[1] is None or log_end <= was[1]:
            continue
        if committed is None or (was[0] is not None and committed <= was[0]):
            out.append(tp)
    return sorted(out)


def _baseline_rule(now: Sample, lags: dict[str, int | None], total: int, samples: list[dict[str, Any]],
                   baseline: Mapping[str, int | None], margin: LagMargin, detail: dict[str, Any]) -> LagVerdict:
    before_total = sum(v for v in baseline.values() if v is not None)
    allowed_total = margin.allowance(before_total)
    over = sorted(tp for tp, v in lags.items()
                  if v is not None and v > margin.allowance(baseline.get(tp) or 0))
    detail["baseline"] = {"total_lag_before": before_total, "allowed_total": allowed_total,
                          "over": {tp: [lags[tp], margin.allowance(baseline.get(tp) or 0)] for tp in over[:20]}}
    if total > allowed_total:
        return LagVerdict(False, None, f"total lag {total} above {allowed_total} (before the change "
                                       f"{before_total}, margin {margin.describe()})")
    if over:
        return LagVerdict(False, None, "lag above the allowance on " + _tp_list(
            [f"{tp} ({lags[tp]} > {margin.allowance(baseline.get(tp) or 0)})" for tp in over]))
    if not samples:
        return LagVerdict(False, None, f"total lag {total} within {allowed_total} (before the change {before_total}); "
                                       "one more poll to see the group commit where records arrive")
    stalled = _stalled(now, samples[0]["offsets"])
    detail["baseline"]["stalled"] = stalled
    if stalled:
        return LagVerdict(False, None, f"records arrived but no commit on {_tp_list(stalled)} since the first "
                                       "sample: the group is not consuming them")
    return LagVerdict(True, "baseline", f"total lag {total} <= {allowed_total} (before the change {before_total}, "
                                        f"margin {margin.describe()}), every partition within its allowance, "
                                        "commits advancing where records arrive")


def _not_growing_rule(now_at: float, now: Sample, lags: dict[str, int | None], samples: list[dict[str, Any]],
                      baseline: Mapping[str, int | None] | None, margin: LagMargin, window_s: float,
                      detail: dict[str, Any]) -> LagVerdict:
    if not samples or now_at - float(samples[0]["at"]) < window_s:
        seen = now_at - float(samples[0]["at"]) if samples else 0.0
        return LagVerdict(False, None, f"watched for {seen:.0f} of {window_s:g} s")
    reference: Sample = samples[0]["offsets"]
    new = sorted(set(now) - set(reference))
    if new:
        return LagVerdict(False, None, f"partition(s) not in the window's first sample: {_tp_list(new)}")
    stalled = _stalled(now, reference)
    grew, idle_behind = [], []
    for tp, entry in now.items():
        was, lag = reference[tp], lags[tp]
        before = lag_of(was)
        if lag is None or before is None:
            grew.append(tp)  # unknown at either end: not judged as not growing
            continue
        arriving = _arrived(entry, was)
        if arriving:
            if lag > margin.allowance(before):
                grew.append(tp)
        elif lag > (margin.allowance(baseline.get(tp) or 0) if baseline is not None and tp in baseline else 0):
            idle_behind.append(tp)
    detail["not_growing"] = {"window_started": samples[0]["at"], "stalled": stalled, "grew": sorted(grew),
                             "idle_behind": sorted(idle_behind)}
    problems = []
    if stalled:
        problems.append(f"records arrived but no commit on {_tp_list(stalled)}")
    if grew:
        problems.append(f"lag grew beyond {margin.describe()} on {_tp_list(sorted(grew))}")
    if idle_behind:
        problems.append(f"no records arriving and lag left behind on {_tp_list(sorted(idle_behind))} "
                        f"({'above its lag before the change' if baseline is not None else 'not 0'})")
    span = now_at - float(samples[0]["at"])
    if problems:
        return LagVerdict(False, None, f"over {span:.0f} s: " + "; ".join(problems))
    arriving_n = sum(1 for tp, e in now.items() if _arrived(e, reference[tp]))
    return LagVerdict(True, "not_growing", f"over {span:.0f} s no partition's lag grew beyond {margin.describe()}, "
                                           f"commits advanced on the {arriving_n} partition(s) with records arriving, "
                                           f"the {len(now) - arriving_n} other(s) at "
                                           f"{'their lag before the change' if baseline is not None else 'lag 0'}")


def keep_samples(  # Any: JSON of several shapes (XCom, reports)
        samples: list[dict[str, Any]], now_at: float, window_s: float) -> list[dict[str, Any]]:
    """The samples a wait keeps: from the newest one at least ``window_s`` old (the next window's reference)
    on; all of them while none is that old."""
    start = 0
    for i, s in enumerate(samples):
        if now_at - float(s["at"]) >= window_s:
            start = i
    return samples[start:]
