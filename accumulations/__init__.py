"""The Accumulation protocol and the standard library of accumulations."""
from .base import Accumulation, FieldAccumulation
from .collections import AllMax, ToList, TopN
from .distinct import ApproxCountDistinct, CountDistinct
from .generic import Combine, Reduce
from .merge import Cogroup, FullOuterJoin, InnerJoin, LeftOuterJoin, MergeAccumulation
from .numeric import Count, Max, Mean, Min, Sum
from .quantiles import ApproxPercentile, Quantiles

__all__ = ["Accumulation", "FieldAccumulation", "Sum", "Count", "Min", "Max", "Mean", "TopN", "AllMax", "ToList",
           "Reduce", "Combine", "MergeAccumulation", "InnerJoin", "LeftOuterJoin", "FullOuterJoin",
           "Cogroup", "CountDistinct", "ApproxCountDistinct", "Quantiles", "ApproxPercentile"]
