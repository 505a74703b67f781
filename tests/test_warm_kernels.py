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
