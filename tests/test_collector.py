"""``tensorlang.collector.paused``: counted pauses of the cycle collector, nested and across threads."""
import gc
import threading

import pytest

from tensorlang import collector


def test_paused_nests_resumes_after_errors_and_leaves_a_disabled_collector_off():
    enabled = gc.isenabled()
    try:
        gc.enable()
        with collector.paused():
            assert not gc.isenabled()
            with collector.paused():
                assert not gc.isenabled()
            assert not gc.isenabled()   # the outer pause still runs
        assert gc.isenabled()
        with pytest.raises(ZeroDivisionError):
            with collector.paused():
                1 / 0
        assert gc.isenabled()
        gc.disable()
        with collector.paused():
            pass
        assert not gc.isenabled()
    finally:
        (gc.enable if enabled else gc.disable)()


def test_paused_counts_the_pauses_of_every_thread():
    enabled = gc.isenabled()
    inside, release, seen = threading.Barrier(3), threading.Event(), []

    def hold():
        with collector.paused():
            inside.wait()
            release.wait()
        seen.append(True)

    try:
        gc.enable()
        threads = [threading.Thread(target=hold) for _ in range(2)]
        for t in threads:
            t.start()
        inside.wait()
        with collector.paused():
            pass
        assert not gc.isenabled()   # this thread's pause ended; the two others still run
        release.set()
        for t in threads:
            t.join()
        assert seen == [True, True] and gc.isenabled()
    finally:
        (gc.enable if enabled else gc.disable)()
