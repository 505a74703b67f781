"""warm_kernels compiles every compiled kernel, so no run pays numba's compile midway (a fuzz
case that first needed a kernel compiled it inside its 10 s)."""

import pytest

numba = pytest.importorskip("numba")


def test_every_kernel_is_compiled_by_warm_kernels(monkeypatch):
    monkeypatch.delenv("HCSIM_NO_NUMBA", raising=False)
    from numba.core.registry import CPUDispatcher

    from hcsim.engine import _kernels
    from hcsim.engine.fairshare import warm_kernels
    from hcsim.topology import _search_kernel

    assert warm_kernels()
    for module in (_kernels, _search_kernel):
        # the kernels Python calls (a leading underscore: a helper compiled into its callers)
        kernels = {name: f for name, f in vars(module).items()
                   if isinstance(f, CPUDispatcher) and not name.startswith("_")}
        assert kernels, module.__name__
        left = sorted(name for name, f in kernels.items() if not f.signatures)
        assert not left, f"{module.__name__}: not compiled by warm_kernels: {left}"


def test_a_job_calls_the_kernels_with_the_types_warm_kernels_compiled(monkeypatch):
    """The demand sums stay float64 through a job: a resync with no flow active once made them
    int64 (numpy's bincount of nothing is int64 whatever its weights), so the job's first run
    compiled six more kernel overloads (5 s more on its first run after installing) and the
    compiled starts then added float demands into an int array."""
    monkeypatch.delenv("HCSIM_NO_NUMBA", raising=False)
    import numpy as np
    from numba.core.registry import CPUDispatcher

    import hcsim.engine.des as des
    from hcsim.engine import _kernels
    from hcsim.engine.fairshare import warm_kernels
    from hcsim.scenario import load_scenario, run_scenario

    assert warm_kernels()
    kernels = {name: f for name, f in vars(_kernels).items() if isinstance(f, CPUDispatcher) and not name.startswith("_")}
    before = {name: set(f.signatures) for name, f in kernels.items()}
    dtypes = set()
    recompute = des.Fabric._recompute_rates

    def watched(self, *args, **kwargs):
        out = recompute(self, *args, **kwargs)
        dtypes.add(self.res_demand.dtype)
        return out

    monkeypatch.setattr(des.Fabric, "_recompute_rates", watched)
    from pathlib import Path

    run_scenario(load_scenario(Path(__file__).parents[1] / "scenarios" / "llm_910b_pod.yaml"))  # a pipeline job: resyncs between bursts
    assert dtypes == {np.dtype(np.float64)}
    new = {name: set(f.signatures) - before[name] for name, f in kernels.items()}
    assert not any(new.values()), new
