"""How far a long step is and about how long it has left, as its job log says it (a training's
epochs, an AutoAttack run's shards)."""
from __future__ import annotations


def time_left(seconds: float) -> str:
    """A time left as a person reads it: 'under a minute left', 'about 7 min left', 'about
    2 h 05 min left'. Rounded to the nearest minute, a half minute up (90 s: about 2 min)."""
    minutes = int(seconds / 60 + 0.5)  # not round(): half to even said 150 s was 2 min
    if minutes < 1:
        return "under a minute left"
    return "about " + (f"{minutes} min" if minutes < 60
                       else f"{minutes // 60} h {minutes % 60:02d} min") + " left"


def left_at_pace(done: int, total: int, times: list[float]) -> str:
    """', about T left' with `total - done` parts to go at the pace of `times` (the seconds of the
    parts this process did; its first left out once there are others: it holds compilation,
    graph capture or warm-up); '' when nothing is left or nothing was timed."""
    if done >= total or not times:
        return ""
    recent = times[1:] or times
    return ", " + time_left((total - done) * sum(recent) / len(recent))


def progress(done: int, total: int, unit: str, times: list[float]) -> str:
    """'done/total unit' and the time left, e.g. '4/10 epochs, about 1 min left'."""
    return f"{done}/{total} {unit}{left_at_pace(done, total, times)}"
