"""TriggerOption and the trigger state machines (Beam's trigger protocol and composites)."""
# The library's public surface first: its operators import this package's modules, and these import
# small modules of ``windowed_operator`` (``config``, ``time_rules``, ``windows``); importing it here,
# before any module of this package starts, lets each run to its end before another uses it.
import windowed_operator as _windowed_operator  # noqa: F401  (see above)

from .base import TimeDomain, Trigger, TriggerContext
from .composite import AfterAll, AfterAny, AfterEach, OrFinally, Repeatedly
from .count import AfterCount
from .option import AccumulationMode, Firing, TriggerOption
from .processing_time import AfterProcessingTime
from .watermark import AfterWatermark, DefaultTrigger

__all__ = [
    "Trigger", "TriggerContext", "TimeDomain", "TriggerOption", "AccumulationMode", "Firing", "AfterWatermark",
    "DefaultTrigger", "AfterCount", "AfterProcessingTime", "Repeatedly", "AfterEach", "AfterAny", "AfterAll",
    "OrFinally",
]
