"""`atoll run` freezes the heap its first trial loaded; a library user's process is left alone."""

from __future__ import annotations

import gc
import weakref

from atoll.runtime import freeze_once_loaded, loaded, resume_full_collections


class _Node:
    pass


def test_a_command_that_asked_freezes_once_loaded_after_freeing_old_cycles_and_others_are_left_alone():
    gc.unfreeze()
    threshold = gc.get_threshold()
    try:
        loaded()  # nothing asked for it (a library user's process): gc untouched
        assert gc.get_freeze_count() == 0 and gc.get_threshold() == threshold

        freeze_once_loaded()
        assert gc.get_threshold()[:2] == threshold[:2] and gc.get_threshold()[2] > 1_000_000
        node = _Node()
        node.cycle = node
        gone = weakref.ref(node)
        gc.collect(1)  # the cycle is old now, where only a full collection finds it
        del node
        loaded()
        assert gc.get_freeze_count() > 10_000  # what the process loaded is out of the collector's reach
        assert gone() is None  # garbage cycles were freed first, not frozen
        assert gc.get_threshold() == threshold  # full collections are back

        gc.unfreeze()
        loaded()  # once only
        assert gc.get_freeze_count() == 0

        freeze_once_loaded()
        resume_full_collections()  # the work ended before anything was loaded
        loaded()
        assert gc.get_freeze_count() == 0 and gc.get_threshold() == threshold
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)
