"""Window families: one small class each, as in Beam's ``window.py``."""
from .base import MergingWindowOption, Window, WindowOption
from .cumulative_windows import CumulativeWindows
from .global_window import GLOBAL_WINDOW, GlobalWindow
from .inherited import InheritedWindows
from .session_windows import SessionWindows
from .sliding_windows import SlidingWindows
from .time_windows import TimeWindows

__all__ = [
    "Window", "WindowOption", "MergingWindowOption", "GlobalWindow", "GLOBAL_WINDOW", "TimeWindows",
    "SessionWindows", "SlidingWindows", "CumulativeWindows", "InheritedWindows",
]
