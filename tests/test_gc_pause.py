"""The collector is paused inside a batch and left as it was found after it, errors included."""
import gc

import pytest

from windowed_operator.spark.worker.gc_pause import collector_paused


def test_the_collector_is_off_inside_and_back_on_after():
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():  # a nested pause leaves the outer one in charge
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_an_error_inside_still_resumes_it():
    with pytest.raises(RuntimeError):
        with collector_paused():
            raise RuntimeError("batch failed")
    assert gc.isenabled()


def test_a_caller_that_turned_it_off_keeps_it_off():
    gc.disable()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()
