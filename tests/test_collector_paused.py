"""A run pauses the cyclic garbage collector and leaves it as it found it."""

import gc

import pytest

import hcsim
from hcsim.topology import single_switch
from hcsim.topology.routing import collector_paused


@pytest.mark.parametrize("enabled", [True, False])
def test_collector_state_is_restored_after_a_run_and_after_an_error(enabled):
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        hcsim.simulate(single_switch(8, 1e9), "allreduce", "1MiB", "ring")
        hcsim.simulate(single_switch(1024, 1e9), "allreduce", "1MiB", "ring", max_work=None)  # a paused run
        assert gc.isenabled() is enabled
        with pytest.raises(RuntimeError), collector_paused():
            assert not gc.isenabled()
            raise RuntimeError
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


def test_collector_is_back_after_a_refused_topology():
    """Compiling pauses the collector too; a graph it refuses leaves it running."""
    was = gc.isenabled()
    try:
        gc.enable()
        topo = single_switch(4, 1e9)
        u, v = next(iter(topo.graph.edges))
        del topo.graph.edges[u, v]["spec"]
        with pytest.raises(hcsim.errors.TopologyError, match="LinkSpec"):
            topo.compiled()
        assert gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()


@pytest.mark.parametrize("collective", ["allreduce", "reduce"])
def test_a_dropped_call_leaves_nothing_for_the_cyclic_collector(collective):
    """A finished event-driven call is freed by reference counting alone: its simulator and
    fabric are in no reference cycle, so a large run needs no full collection first (one
    scans the whole heap, a large topology's graph included)."""
    topo = single_switch(16, 1e9)
    assert hcsim.simulate(topo, collective, "1MiB", "ring").time_s > 0  # compiles the topology
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        result = hcsim.simulate(topo, collective, "1MiB", "ring", mode="des")
        assert result.time_s > 0 and len(result.steps) > 0 and len(result.links) > 0
        del result
        assert gc.collect() == 0
    finally:
        (gc.enable if was else gc.disable)()
