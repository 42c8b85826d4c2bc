"""The processor Spark pickles declares its state without importing the library's engine, and
builds the real processor at a task's first call."""
import pickle
import subprocess
import sys

import pytest

pytestmark = pytest.mark.spark


def test_unpickling_and_declaring_imports_no_engine():
    """What the driver-side pre-init of each stateful operator does: unpickle, then init."""
    code = """
import pickle, sys
from accumulations import Sum
from windowed_operator import KeyedWindowedOperator, TimeWindows
from windowed_operator.spark.worker.deferred import DeferredProcessor
from windowed_operator.spark.plan.paths import Paths
from windowed_operator.spark.plan import build_plan
plan = build_plan(KeyedWindowedOperator(TimeWindows(10), Sum("v"), key="k", timestamp="t"), Paths(),
                  time_mode="EventTime", value_type="bigint", key_type="string")
blob = pickle.dumps(DeferredProcessor.of(plan))
for name in [m for m in sys.modules if m.startswith(("windowed_operator", "accumulations", "triggers", "pandas",
                                                         "numpy", "pydantic"))]:
    del sys.modules[name]

class Handle:
    declared = []
    def getValueState(self, name, schema):
        self.declared.append((name, schema.simpleString()))
    def getMapState(self, name, key, value):
        self.declared.append((name, key.simpleString(), value.simpleString()))

processor = pickle.loads(blob)
processor.init(Handle())
heavy = sorted(m for m in sys.modules if m.startswith(("pandas", "numpy", "pydantic", "windowed_operator.spark.worker.processor",
                                                       "windowed_operator.spark.plan", "windowed_operator.engine.core")))
print(heavy)
print(Handle.declared)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0] == "[]"
    assert out[1] == str([("windowed_operator_state", "struct<blob:binary>"), ("wo_group", "struct<meta:string>"),
                          ("wo_keys", "struct<key:string>", "struct<record:string>"),
                          ("wo_due", "struct<domain:string,bucket:bigint,part:int>", "struct<entries:string>")])


def test_the_real_processor_is_built_once_per_task_with_the_declared_state(monkeypatch):
    from windowed_operator.spark.worker import deferred, processor

    built = []

    class Recording:
        def __init__(self, plan):
            self.plan = plan
            built.append(self)

        def init(self, handle, state):
            self.handle, self.state = handle, state

        def handleInputRows(self, key, rows, timerValues):
            return iter([("rows", key)])

        def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
            return iter([("timer", key)])

        def close(self):
            self.closed = True

    monkeypatch.setattr(processor, "WindowedStatefulProcessor", Recording)
    monkeypatch.setattr(deferred, "declare_state", lambda handle, key_type: ("declared", key_type))

    class Plan:
        key_type = "bigint"

    task = pickle.loads(pickle.dumps(deferred.DeferredProcessor.of(Plan())))
    task.init("handle")
    assert not built  # nothing built before the first call
    assert list(task.handleInputRows((1,), iter([]), None)) == [("rows", (1,))]
    assert list(task.handleExpiredTimer((2,), None, None)) == [("timer", (2,))]
    task.close()
    (real,) = built
    assert (real.handle, real.state, real.closed) == ("handle", ("declared", "bigint"), True)
    assert isinstance(real.plan, Plan)
