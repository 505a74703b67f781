"""Studies pay for their topologies from their one work bound (hcsim.limits.topology_work).

A what-if case costs a unit per directed link of its topology (its run's tables), and
WORK_PER_LINK_BUILT more when it copied the topology to perturb it; a plan point pays for the
topology it builds, and an NPU count no tp x pp divides is invalid before it is built.
"""

import pytest

from hcsim import plan as plan_module
from hcsim.limits import WORK_PER_LINK_BUILT, WORK_PER_LINK_RUN, topology_work
from hcsim.plan import plan
from hcsim.topology import leaf_spine, single_switch
from hcsim.whatif import whatif_collective


def test_topology_work_counts_directed_links():
    t = leaf_spine(4, 4, 2, 25e9, 1e-6)
    links = t.graph.number_of_edges()
    assert topology_work(t) == links * WORK_PER_LINK_RUN
    assert topology_work(t, built=True) == links * (WORK_PER_LINK_RUN + WORK_PER_LINK_BUILT)


def _whatif(t, perturbations, max_work):
    return whatif_collective(t, "allreduce", "1K", perturbations, algorithm="ring", ranks=[0, 1],
                             max_work=max_work, progress=False).set_index("case")


def test_a_whatif_case_pays_for_its_topology_and_a_perturbed_copy_more():
    t = single_switch(4096, 25e9, 1e-6)
    links = t.graph.number_of_edges()
    free = _whatif(t, ["ecmp-seed=1"], None)
    assert (free["status"] == "ok").all()
    # a bound that pays for the baseline's and one more unchanged case's tables (and their
    # tiny runs), but not for a copy of the topology: the copy is refused, the seed case runs
    bound = 2 * links * WORK_PER_LINK_RUN + 5_000
    assert bound < links * (WORK_PER_LINK_RUN + WORK_PER_LINK_BUILT)
    df = _whatif(t, ["ecmp-seed=1", "degrade-link=npu0,sw0:0.5"], bound)
    assert df["status"].tolist() == ["ok", "ok", "refused"]
    assert df["reason"].iloc[2].startswith(f"max_work = {bound}: the cases took ")
    # with room for the copy, it runs
    roomy = _whatif(t, ["ecmp-seed=1", "degrade-link=npu0,sw0:0.5"], bound + links * WORK_PER_LINK_BUILT
                    + links * WORK_PER_LINK_RUN)
    assert (roomy["status"] == "ok").all()


def test_a_plan_point_pays_for_the_topology_it_builds(monkeypatch):
    from hcsim import limits

    doc = {"name": "two-servers", "topology": "atlas900-a2-pod", "servers": 2, "options": {"max_work": 1_000_000},
           "workload": {"communicators": {"world": "all"}, "ops": [
               {"kind": "collective", "name": "ar", "comm": "world", "collective": "allreduce", "size": "1K"}]}}
    assert (plan(doc, {"servers": [2, 3]}, progress=False)["status"] == "ok").all()
    # priced so that one point's topology passes the bound: refused by the plan's bound, before its run
    monkeypatch.setattr(limits, "WORK_PER_LINK_BUILT", 1_000_000)
    df = plan(doc, {"servers": [2, 3]}, progress=False)
    assert df["status"].tolist() == ["refused", "refused"]
    assert df["reason"].str.startswith("max_work = 1000000: the plan's points took ").all()


@pytest.mark.parametrize("servers, reason", [(3, "dp = 'auto': tp x pp = 16 does not divide the 24 NPUs")])
def test_an_indivisible_npu_count_is_invalid_before_its_topology_is_built(monkeypatch, servers, reason):
    from hcsim.topology import io

    built = []
    real = io.topology_from_dict

    def counting(doc, where="topology", **kw):
        built.append(kw.get("servers"))
        return real(doc, where, **kw)

    monkeypatch.setattr(io, "topology_from_dict", counting)
    doc = {"name": "llm", "topology": "atlas900-a2-pod", "servers": 2, "layout": {"tp": 8, "pp": 2},
           "model": {"name": "tiny", "layers": 2, "hidden": 256, "heads": 4, "seq_len": 128, "vocab": 1000},
           "workload": {"generator": "training_step", "params": {"micro_batches": 2, "micro_batch": 2}}}
    df = plan(doc, {"servers": [servers]}, progress=False)
    assert df["status"].tolist() == ["invalid"] and df["reason"].iloc[0] == reason
    assert servers not in built  # only the one-server probe was built
    assert plan_module  # (the module whose _run_point does this)
