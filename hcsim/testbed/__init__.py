"""An emulated cluster on this machine: Linux network namespaces as hosts, bridges as
switches, ``tc`` tbf shaping every direction, and MPI ranks launched into the namespaces.
Root only. Its hcsim topology is generated from the same description."""

from .netns import Testbed, TestbedSpec, cleanup_stale, parse_testbed

__all__ = ["Testbed", "TestbedSpec", "cleanup_stale", "parse_testbed"]
