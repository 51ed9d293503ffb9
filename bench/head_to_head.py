"""The check after a grid: the point a tool named against the grid's best,
head to head in fresh rounds (bench/remote, bench/layout).

The grid's best is the largest of many medians. Among points that are equal
within their noise it is the one whose rounds were lucky, so its median
overstates it (the winner's curse), and a named point measured in the same
rounds looks worse than it is. Fresh rounds of the pair alone are picked by
nothing: the ratio of their medians is the comparison's figure.
"""

import statistics


def head_to_head(measure, named, best, rounds, rng):
    """`named` against `best` in `rounds` rounds of the pair, alternating
    (which goes first drawn from `rng` each round); `measure(point)` gives
    one figure. Returns each one's figures and the ratio of their medians,
    or None when they are the same point or rounds is 0."""
    if named == best or rounds <= 0:
        return None
    figures = {named: [], best: []}
    for _ in range(rounds):
        pair = [named, best]
        rng.shuffle(pair)
        for point in pair:
            figures[point].append(measure(point))
    return {"rounds": rounds, "named": figures[named], "best": figures[best],
            "ratio": statistics.median(figures[named]) / statistics.median(figures[best])}
