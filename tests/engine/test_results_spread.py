"""The book's one convention for a spread over seeds (issue 52): energylab.engine.results.seed_spread."""
import statistics

import pytest

from energylab.engine.results import seed_spread


def test_seed_spread_is_the_sample_standard_deviation():
    xs = [0.5, 0.7, 0.6, 0.9]
    mean, std = seed_spread(xs)
    assert mean == pytest.approx(statistics.fmean(xs), abs=1e-15)
    assert std == pytest.approx(statistics.stdev(xs), abs=1e-15)  # ddof = 1
    assert std != pytest.approx(statistics.pstdev(xs))  # not the population's
    assert seed_spread(iter([0.25])) == (0.25, 0.0)  # one run: no spread, whatever the generator
    with pytest.raises(ValueError, match="at least one"):
        seed_spread([])
