"""Sweeps beyond one process: independent points on a Dask cluster.

A sweep, a selection study or a planning sweep is a list of independent points (each a
:func:`hcsim.simulate` call or a job run). :func:`map_points` runs a function over such a
list, in this process or on a ``dask.distributed.Client`` (a local cluster of worker
processes, or a remote scheduler), and returns the results in the list's order, so the
table built from them is the same either way. :func:`dask_client` makes the client from
the CLI's ``--workers N`` / ``--scheduler tcp://HOST:PORT``.

Dask is an optional extra (``pip install 'hcsim[dask]'``) and is imported only when a
client is asked for. Everything sent to a worker is pickled: the function must be defined at
a module's top level (or be a plain callable cloudpickle can carry), the items plain data.

Examples
--------
>>> from hcsim.parallel import map_points
>>> map_points(abs, [-2, 3, -1])
[2, 3, 1]
"""

from __future__ import annotations

import logging
import os
import re
import socket
from contextlib import contextmanager

from .errors import ConfigError, bad_value, is_int
from .progress import check_progress, progress_bar

CONNECT_TIMEOUT_S = 5
"""How long :func:`dask_client` waits for a scheduler before it gives up."""

NEEDS_DASK = "{flag} needs the optional extra hcsim[dask]: pip install 'hcsim[dask]'"

WORKERS_PER_CPU = 1
"""A local cluster has at most this many worker processes per CPU of this machine: each is
one busy thread, so more than the CPUs only add start-up time and memory (each costs about
1.5 s of CPU before its first point: :data:`WORK_PER_LOCAL_WORKER`)."""

WORK_PER_LOCAL_WORKER = 1_500_000
"""Work units (about 1 us each, :data:`hcsim.limits.MAX_WORK`'s) a worker process of a local
cluster costs before its first point. Measured on a 2-core machine: a cluster of 2 started and
closed, 1.7 s of CPU over the process tree (an interpreter importing hcsim, pandas and Dask in
each, the scheduler); loading the engine's compiled kernels from numba's cache, 0.7 s more in
each worker. A command's bound pays for them first (:func:`startup_work`); a remote cluster's
workers are already running and cost nothing here."""

_LOCAL_WORKERS: dict = {}  # id(client) -> worker processes dask_client started for it


def startup_work(client) -> int:
    """Work units the local cluster behind ``client`` cost to start (0 for None or a remote
    cluster): :data:`WORK_PER_LOCAL_WORKER` per worker process.

    Examples
    --------
    >>> startup_work(None)
    0
    """
    return WORK_PER_LOCAL_WORKER * _LOCAL_WORKERS.get(id(client), 0) if client is not None else 0


def map_points(fn, items, *, client=None, progress=None, desc: str = "", shared=None) -> list:
    """``[fn(item) for item in items]``, here or on a Dask cluster, in ``items``' order.

    Parameters
    ----------
    fn : callable
        One point's work. Run on a cluster it must pickle: a module-level function.
    items : sequence
        The points (plain, picklable data).
    client : dask.distributed.Client, optional
        None: a loop in this process. A client: one task per item (``pure=False``: every
        point runs, even two equal ones); the results are gathered in ``items``' order.
    progress : None, True or False
        A bar over the points (:func:`hcsim.progress.progress_enabled`); on a cluster it
        advances as points finish, in whatever order they finish.
    desc : str
        The bar's label.
    shared : object, optional
        Data every point needs (a topology, options): passed as ``fn(item, shared)``, sent to
        each worker once rather than with every point.

    Returns
    -------
    list
        One result per item, in order. An exception raised by a point is raised again here as
        itself (an :class:`~hcsim.errors.HcsimError` stays a one-line error): the first
        failing point in ``items``' order, as the serial loop raises, also on a cluster, where
        the points still pending are then cancelled.

    Examples
    --------
    >>> map_points(pow, [1, 2, 3], shared=2)
    [1, 4, 9]
    """
    check_progress(progress)
    if client is not None and not all(callable(getattr(client, m, None)) for m in ("map", "gather", "scatter")):
        raise bad_value("client", client, "a dask.distributed.Client (hcsim.parallel.dask_client) or None")
    items = list(items)
    if client is None:
        out = []
        with progress_bar(len(items), desc, progress) as bar:
            for item in items:
                out.append(fn(item) if shared is None else fn(item, shared))
                bar.update()
        return out
    return _map_on_client(client, fn, items, progress, desc, shared)


def _map_on_client(client, fn, items, progress, desc, shared) -> list:
    from distributed import as_completed, wait

    if not items:
        return []
    if shared is None:
        futures = client.map(fn, items, pure=False)
    else:
        # scattered once (to every worker), not pickled into every task
        [handle] = client.scatter([shared], broadcast=True, hash=False)
        futures = client.map(fn, items, [handle] * len(items), pure=False)
    try:
        with progress_bar(len(items), desc, progress) as bar:
            place = {future.key: i for i, future in enumerate(futures)}
            for future in as_completed(futures):
                if future.status == "error":
                    # the first point in order that fails, as the loop in this process would raise
                    # (not whichever failure finished first): the earlier points are waited for
                    earlier = futures[:place[future.key] + 1]
                    wait(earlier)
                    next(f for f in earlier if f.status == "error").result()  # raises it, as the worker did
                bar.update()
        return client.gather(futures)
    finally:
        client.cancel(futures)  # nothing left running after an error (a no-op when all are done)


def max_local_workers() -> int:
    """The most worker processes :func:`dask_client` starts here (:data:`WORKERS_PER_CPU` per CPU,
    and at least 2, so that a one-CPU machine can still check a parallel run against a serial one).

    Examples
    --------
    >>> max_local_workers() >= 2
    True
    """
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        cpus = os.cpu_count() or 1
    return max(2, WORKERS_PER_CPU * cpus)


SCHEDULER_ADDRESS = re.compile(r"(tcp|tls)://[^\s:/]+:\d{1,5}")


@contextmanager
def dask_client(workers=None, scheduler=None, *, flags: bool = False):
    """A Dask client for :func:`map_points`, closed when the block ends.

    Parameters
    ----------
    workers : int, optional
        Start a local cluster of this many worker processes (one thread each: the engine is
        pure Python and numpy, so threads would share one interpreter lock) on this machine.
    scheduler : str, optional
        ``tcp://HOST:PORT`` of a running ``dask scheduler`` (its workers need hcsim installed,
        at the same version); given up on after :data:`CONNECT_TIMEOUT_S` seconds.
    flags : bool
        Name the fields ``--workers`` and ``--scheduler`` in errors (the command line's).

    Yields
    ------
    dask.distributed.Client or None
        None when neither is given (points then run in this process).

    Examples
    --------
    >>> with dask_client() as client:
    ...     client is None
    True
    """
    w_field, s_field = ("--workers", "--scheduler") if flags else ("workers", "scheduler")
    if workers is not None and scheduler is not None:
        raise bad_value(w_field, workers, f"give {w_field} (a local cluster) or {s_field} (a running one), not both "
                        f"({s_field} = {scheduler!r})")
    if workers is not None and (not is_int(workers) or workers < 1):
        raise bad_value(w_field, workers, "a positive integer (worker processes of a local Dask cluster)")
    workers = None if workers is None else int(workers)
    if workers is not None and workers > max_local_workers():
        raise bad_value(w_field, workers, f"at most {max_local_workers()} worker processes on this machine "
                        f"({WORKERS_PER_CPU} per CPU; for more, run a cluster and give {s_field})")
    if scheduler is not None and (not isinstance(scheduler, str) or not SCHEDULER_ADDRESS.fullmatch(scheduler)
                                  or not 1 <= int(scheduler.rsplit(":", 1)[1]) <= 65535):
        raise bad_value(s_field, scheduler, "a Dask scheduler's address, tcp://HOST:PORT (port 1 to 65535)")
    if workers is None and scheduler is None:
        yield None
        return
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ConfigError(NEEDS_DASK.format(flag="--workers" if workers is not None else "--scheduler")) from None
    if workers is not None:
        # no dashboard and free ports: the scheduler's HTTP server would otherwise try 8787, which
        # another cluster on this machine may hold (a warning on stderr); the workers' logs quiet,
        # so that a point's error reaches the caller as one line, not as a worker's "Compute
        # Failed" traceback on stderr
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                          scheduler_kwargs={"dashboard": False, "dashboard_address": ":0"},
                          silence_logs=logging.CRITICAL) as cluster, Client(cluster) as client:
            _LOCAL_WORKERS[id(client)] = workers
            try:
                yield client
            finally:
                _LOCAL_WORKERS.pop(id(client), None)
        return
    host, port = scheduler.split("://", 1)[1].rsplit(":", 1)
    try:  # a refused or unroutable address fails here at once, not after Dask's retries
        socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:  # refused, unroutable, unknown host, timed out
        why = exc.strerror or type(exc).__name__
        raise ConfigError(f"{s_field} = {scheduler!r}: no Dask scheduler answers there ({why}; "
                          f"waited at most {CONNECT_TIMEOUT_S} s)") from None
    try:
        client = Client(scheduler, timeout=CONNECT_TIMEOUT_S)
    except Exception as exc:  # something listens but does not speak Dask (an HTTP server: a MemoryError)
        raise ConfigError(f"{s_field} = {scheduler!r}: no Dask scheduler answers there (a connection opens, "
                          f"but {type(exc).__name__} in Dask's handshake; waited at most {CONNECT_TIMEOUT_S} s)"
                          ) from None
    with client:
        yield client
