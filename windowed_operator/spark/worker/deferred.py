"""What Spark pickles as the stateful processor: the plan as bytes, the processor built on first use.

Before a query's first batch, pyspark runs each stateful operator's ``init`` on the driver in a
fresh Python process, only to learn which state variables it declares (pyspark 4.3's
``transform_with_state_driver_worker``).  Unpickling ``WindowedStatefulProcessor`` there imported
the whole library with pandas (0.8-1.0 s of the about 2.5 s each operator added to the first batch's
``queryPlanning``, measured with py-spy on that process).  This processor carries the plan as
cloudpickled bytes and declares the state from ``state_schemas``, which imports nothing but
pyspark's types; the plan is unpickled and the real processor built at the first rows or timer of a
task, with the state variables declared here.
"""
from __future__ import annotations

from typing import Any, Iterator, Optional

from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

from .state_schemas import DeclaredState, declare_state


class DeferredProcessor(StatefulProcessor):
    """The StatefulProcessor Spark pickles: only the plan's bytes and the key's type, so that
    unpickling it on an executor imports nothing of the library; ``init`` declares the state, and
    the processor itself (``processor.WindowedStatefulProcessor``) is built at the first call, in the
    worker, from the plan."""

    def __init__(self, plan_bytes: bytes, key_type: Optional[str]) -> None:
        self.plan_bytes, self.key_type = plan_bytes, key_type
        self._processor: Any = None

    @classmethod
    def of(cls, plan: Any) -> "DeferredProcessor":
        from pyspark import cloudpickle

        return cls(cloudpickle.dumps(plan), plan.key_type)

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.state: DeclaredState = declare_state(handle, self.key_type)
        self._processor = None

    def processor(self) -> Any:
        """The ``WindowedStatefulProcessor`` of this task, built at its first call."""
        if self._processor is None:
            import pickle

            from .processor import WindowedStatefulProcessor

            self._processor = WindowedStatefulProcessor(pickle.loads(self.plan_bytes))
            self._processor.init(self.handle, self.state)
        return self._processor

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:
        return self.processor().handleInputRows(key, rows, timerValues)

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[Any]:
        return self.processor().handleExpiredTimer(key, timerValues=timerValues, expiredTimerInfo=expiredTimerInfo)

    def close(self) -> None:
        if self._processor is not None:
            self._processor.close()
