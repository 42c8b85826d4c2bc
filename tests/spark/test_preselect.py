"""Pre-selection of rows for AllMax and TopN in the scan stage (``spark/preselect.py``): what it
hands on folds to what all the rows fold to, in every window over the panes, and it counts every row."""
import random
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest

from accumulations import AllMax, TopN
from windowed_operator import TimeWindows
from windowed_operator.spark.scan.preselect import WEIGHT_COLUMN, PreSelection

pytestmark = pytest.mark.spark  # (no JVM: pyspark's package is imported, not started)


@pytest.mark.parametrize("accumulation", [AllMax(field="price"), TopN(2, field="price")], ids=["all-max", "top-2"])
@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "non-keyed"])
def test_selected_rows_fold_as_all_rows_do_in_every_window(accumulation, keyed):
    window = TimeWindows(10).slide_by(4)  # panes of 2 ms, windows over 5 of them
    rng = random.Random(3)
    for trial in range(60):
        n = rng.randint(1, 80)
        rows = [{"user": rng.choice("abc"), "ts": rng.randint(-20, 40), "price": rng.choice([1, 2, 3, None]),
                 "id": i} for i in range(n)]
        batches = pa.Table.from_pylist(rows).to_batches(max_chunksize=rng.randint(1, n))
        select = PreSelection(layout=window.pane_layout(), accumulation=accumulation,
                              key_column="user" if keyed else None, time_column="ts", reader=None)
        out = pa.Table.from_batches(list(select(iter(batches)))).to_pylist()
        assert sum(r[WEIGHT_COLUMN] for r in out) == n
        assert [r["id"] for r in out] == sorted(r["id"] for r in out), "rows keep their order"
        kept = [{k: v for k, v in r.items() if k != WEIGHT_COLUMN} for r in out]
        assert all(r in rows for r in kept)
        for start in range(-32, 44, 4):  # the windows (starts at multiples of the slide)
            for user in ("abc" if keyed else [None]):
                def inside(r):
                    return start <= r["ts"] < start + 10 and (user is None or r["user"] == user) \
                        and r["price"] is not None
                everything = [r for r in rows if inside(r)]
                chosen = [r for r in kept if inside(r)]
                fold = lambda items: accumulation.accumulate_all([], items)  # noqa: E731
                if isinstance(accumulation, TopN):  # (which of rows tied at the n-th place: either)
                    assert Counter(r["price"] for r in fold(chosen)) == Counter(r["price"] for r in fold(everything))
                else:
                    assert fold(chosen) == fold(everything)
