"""TriggerOption and the trigger state machines (Beam's trigger protocol and composites)."""
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
