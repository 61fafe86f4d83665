"""How energylab/tasks/sudoku_hard.txt was made: searches for 9×9 puzzles with 17–21 givens (time-limited, so a
rerun finds other puzzles), then the catalogue file. Each search appends ``givens puzzle solution seconds`` lines.

    python scripts/sudoku_catalogue.py walk 900 found.txt       # random digs + 60-step walks: 19-21 givens
    python scripts/sudoku_catalogue.py neighbours 60 n17.txt    # {-1,+1} moves from the two public 17s
    python scripts/sudoku_catalogue.py down 150 found.txt 20 n19.txt   # {-2,+1} moves: 20 -> 19 givens
    python scripts/sudoku_catalogue.py down 90 found.txt 19 n18.txt    # 19 -> 18
    python scripts/sudoku_catalogue.py write found.txt n17.txt n18.txt n19.txt   # certify, sort, write the file
"""
import itertools
import random
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from energylab.tasks.sudoku_generate import _walk_down, dig, random_grid  # noqa: E402
from energylab.tasks.sudoku_solver import count_solutions, geometry, solve  # noqa: E402

GEO = geometry(9)
PUBLIC17 = ("000000010400000000020000000000050407008000300001090000300400200050100000000806000",  # Royle's
            "000000000000003085001020000000507000004000100090000000500000073002010000000040009")  # Wikipedia's


def line(k: int, flat, t0: float) -> str:
    board = np.array(flat).reshape(9, 9)
    assert count_solutions(board) == 1 and (board > 0).sum() == k
    return f"{k} {''.join(map(str, flat))} {''.join(map(str, solve(board).ravel()))} {time.time() - t0:.1f}\n"


def walk(secs: float, out: str, seed: int = 1) -> None:
    rng, t0 = random.Random(seed), time.time()
    with open(out, "a") as f:
        while time.time() - t0 < secs:
            grid = random_grid(rng)
            removed = set(dig(grid, rng))
            p = _walk_down([0 if i in removed else v for i, v in enumerate(grid)], grid, rng, 17, 60)
            if sum(1 for v in p if v) <= 21:
                f.write(line(sum(1 for v in p if v), p, t0))


def unique_additions(q: list[int], limit: int):
    """Every (cell, digit) that exactly one solution of ``q`` has (None if q has ``limit`` solutions or more)."""
    sols = GEO.solutions(q, limit)
    if len(sols) >= limit:
        return None
    S = np.array([GEO.to_digits(s) for s in sols])  # (m, 81)
    for c in (i for i in range(81) if not q[i]):
        vals, counts = np.unique(S[:, c], return_counts=True)
        yield from ((c, int(v)) for v in vals[counts == 1])


def moves(secs: float, sources: list[str], drop: int, out: str, limit: int) -> None:
    """{-drop, +1} moves from each source puzzle (breadth first when drop = 1: new puzzles become sources)."""
    found, queue, t0, rng = set(sources), list(sources), time.time(), random.Random(0)
    with open(out, "a") as f:
        while queue and time.time() - t0 < secs:
            flat = [int(c) for c in queue.pop(0)]
            groups = list(itertools.combinations([i for i in range(81) if flat[i]], drop))
            rng.shuffle(groups)
            for group in groups:
                if time.time() - t0 >= secs:
                    break
                q = [0 if i in group else v for i, v in enumerate(flat)]
                for c, v in unique_additions(q, limit) or ():
                    r = q.copy()
                    r[c] = v
                    key = "".join(map(str, r))
                    if key not in found:
                        found.add(key)
                        f.write(line(sum(1 for x in r if x), r, t0))
                        if drop == 1:
                            queue.append(key)


def write(sources: list[str]) -> None:
    rows = {}
    for name in sources:
        for text in Path(name).read_text().splitlines():
            if text and not text.startswith("#"):
                k, p, s = text.split()[:3]
                rows.setdefault(p, (int(k), p, s))
    for p in PUBLIC17:
        rows.setdefault(p, (17, p, "".join(map(str, solve(np.array([int(c) for c in p]).reshape(9, 9)).ravel()))))
    path = Path(__file__).resolve().parents[1] / "energylab" / "tasks" / "sudoku_hard.txt"
    old = [t for t in path.read_text().splitlines() if t.startswith("#")] if path.exists() else []
    with open(path, "w") as f:
        f.write("".join(t + "\n" for t in old))  # keep the provenance header
        for k, p, s in sorted(rows.values()):
            assert count_solutions(np.array([int(c) for c in p]).reshape(9, 9)) == 1
            f.write(f"{k} {p} {s}\n")


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "walk":
        walk(float(args[0]), args[1])
    elif cmd == "neighbours":
        moves(float(args[0]), list(PUBLIC17), 1, args[1], 3000)
    elif cmd == "down":
        src = [t.split()[1] for t in Path(args[1]).read_text().splitlines()
               if t and not t.startswith("#") and int(t.split()[0]) == int(args[2])]
        moves(float(args[0]), src, 2, args[3], 500)
    elif cmd == "write":
        write(args)
    else:
        raise SystemExit(__doc__)
