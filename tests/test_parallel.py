"""Sweeps beyond one process (hcsim.parallel): the same tables on a 2-worker Dask cluster as in
one process, points in order, a point's error raised as itself, one-line errors for bad
--workers / --scheduler."""

import re
import socket
import sys

import pandas as pd
import pytest

import hcsim
from hcsim.api import WorkBudget, _sweep_point
from hcsim.errors import ConfigError, HcsimError
from hcsim.parallel import NEEDS_DASK, dask_client, map_points
from hcsim.topology import leaf_spine
from hcsim.units import parse_size


def _dask_missing() -> str | None:
    try:
        import distributed  # noqa: F401
    except ImportError as exc:
        return f"dask.distributed is not installed (pip install 'hcsim[dask]'; make installs it): {exc}"
    return None


needs_dask = pytest.mark.skipif(_dask_missing() is not None, reason=_dask_missing() or "")


@pytest.fixture(scope="module")
def client():
    """One local cluster of 2 worker processes for the module (starting one takes about 1.5 s)."""
    if _dask_missing():
        pytest.skip(_dask_missing())
    with dask_client(workers=2) as c:
        yield c


def _small_leaf_spine():
    return leaf_spine(4, 4, 2, 25e9, 1e-6)  # 16 NPUs, 4 leaves, 2 spines: flows meet on uplinks


@needs_dask
def test_sweep_on_a_cluster_is_the_serial_table(client):
    topo = _small_leaf_spine()
    kw = dict(sizes=("1K", "1M"), algorithms=["ring", "hd", "nhr", "mesh"])
    serial = hcsim.sweep(topo, "allreduce", **kw)
    spread = hcsim.sweep(topo, "allreduce", client=client, **kw)
    pd.testing.assert_frame_equal(serial, spread)
    assert serial.attrs == spread.attrs
    assert len(serial) == 11 * 4 and serial["time_us"].notna().all()


@needs_dask
def test_sweep_on_a_cluster_keeps_refusals_and_auto(client):
    # a double ring allreduce on 16 ranks holds 960 transfers, a ring 480: a bound between them refuses
    # every double_ring point, which the table records in place ("refused"), as the serial sweep does
    topo = _small_leaf_spine()
    kw = dict(sizes=["4K", "256K"], algorithms=["double_ring", "ring", "auto", "best"], max_transfers=600)
    serial = hcsim.sweep(topo, "allreduce", **kw)
    spread = hcsim.sweep(topo, "allreduce", client=client, **kw)
    pd.testing.assert_frame_equal(serial, spread)
    assert (serial.loc[serial["algorithm"] == "double_ring", "refused"] != "").all()
    assert (serial.loc[serial["algorithm"] == "ring", "refused"] == "").all()


@needs_dask
def test_analytical_sweep_on_a_cluster_is_the_serial_table(client):
    kw = dict(sizes=("1K", "64M"), algorithms=["ring", "mesh", "auto"], mode="analytical")
    pd.testing.assert_frame_equal(hcsim.sweep("atlas800t-a2", "allgather", **kw),
                                  hcsim.sweep("atlas800t-a2", "allgather", client=client, **kw))


@needs_dask
def test_select_on_a_cluster_is_the_serial_table(client):
    kw = dict(sizes=("256K", "4M"))  # pipeline overtakes mesh/nhr at 4 MiB
    serial = hcsim.select("atlas900-a2-pod", "allgather", **kw)
    spread = hcsim.select("atlas900-a2-pod", "allgather", client=client, **kw)
    pd.testing.assert_frame_equal(serial, spread)
    assert serial.attrs == spread.attrs
    assert serial.attrs["crossovers"]  # a study with a change of winner, so the attrs carry something


@needs_dask
def test_map_points_keeps_the_order_of_its_items(client):
    # big sizes take longer, so on two workers the points finish out of order
    shared = (_small_leaf_spine(), "allreduce", {}, WorkBudget(None))
    points = [(parse_size(n), "ring") for n in ("64M", "1K", "16M", "4K", "1M", "8")]
    serial = map_points(_sweep_point, points, shared=shared)
    assert map_points(_sweep_point, points, shared=shared, client=client) == serial
    assert [r[2] for r in serial] == [n for n, _ in points]
    assert map_points(abs, [-3, 1, -2, 5], client=client) == [3, 1, 2, 5]
    assert map_points(abs, [], client=client) == []


@needs_dask
def test_map_points_raises_a_points_own_error(client):
    with pytest.raises(ConfigError, match=r"^size = 'twelve'") as info:
        map_points(parse_size, ["1K", "twelve", "2M"], client=client)
    assert "\n" not in str(info.value)
    with pytest.raises(ConfigError, match=r"^size = 'twelve'"):
        map_points(parse_size, ["1K", "twelve", "2M"])
    assert map_points(parse_size, ["1K", "2M"], client=client) == [1024, 2 * 1024 * 1024]  # the client still works


def test_map_points_serially():
    assert map_points(pow, [1, 2, 3], shared=2) == [1, 4, 9]
    assert map_points(str, range(3)) == ["0", "1", "2"]


@needs_dask
def test_a_local_cluster_leaves_port_8787_alone(client):
    # the scheduler's HTTP server on a free port: another cluster may hold 8787 (Dask's default),
    # and taking it would print a warning on stderr
    assert client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.http_server.port) != 8787


@needs_dask
def test_a_running_scheduler_by_address(client):
    address = client.scheduler.address
    with dask_client(scheduler=address) as remote:
        assert remote is not client and remote.scheduler.address == address
        assert map_points(abs, [-1, -2], client=remote) == [1, 2]


@pytest.mark.parametrize("workers, scheduler, match", [
    (0, None, r"^workers = 0: a positive integer"),
    (-2, None, r"^workers = -2: a positive integer"),
    (True, None, r"^workers = True: a positive integer"),
    (1.5, None, r"^workers = 1.5: a positive integer"),
    (2, "tcp://127.0.0.1:8786", r"^workers = 2: give workers .* or scheduler .*, not both"),
    (None, "127.0.0.1:8786", r"^scheduler = '127.0.0.1:8786': a Dask scheduler's address, tcp://HOST:PORT"),
    (None, "tcp://host:99999", r"^scheduler = 'tcp://host:99999'"),
    (None, 8786, r"^scheduler = 8786"),
])
def test_dask_client_refuses_bad_settings_in_one_line(workers, scheduler, match):
    with pytest.raises(ConfigError, match=match) as info, dask_client(workers, scheduler):
        pass
    assert "\n" not in str(info.value)


def test_no_client_without_workers_or_scheduler():
    with dask_client() as c:
        assert c is None


@needs_dask
def test_an_unreachable_scheduler_is_a_quick_one_line_error():
    with socket.socket() as s:  # a port nobody listens on: bound, never listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        with pytest.raises(ConfigError, match=rf"^scheduler = 'tcp://127.0.0.1:{port}': no Dask scheduler answers"), \
                dask_client(scheduler=f"tcp://127.0.0.1:{port}"):
            pass


def test_without_dask_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed -> ImportError
    with pytest.raises(ConfigError) as info, dask_client(workers=2):
        pass
    assert str(info.value) == NEEDS_DASK.format(flag="--workers") == \
        "--workers needs the optional extra hcsim[dask]: pip install 'hcsim[dask]'"
    with pytest.raises(ConfigError, match=r"^--scheduler needs the optional extra"), \
            dask_client(scheduler="tcp://127.0.0.1:8786"):
        pass


@pytest.mark.parametrize("argv, match", [
    (["sweep", "--op", "allreduce", "--workers", "0"], r"^hcsim: error: --workers = 0: a positive integer"),
    (["select", "--op", "allgather", "--workers", "-1"], r"^hcsim: error: --workers = -1: a positive integer"),
    (["sweep", "--op", "allreduce", "--scheduler", "tcp://127.0.0.1:1"],
     r"^hcsim: error: --(scheduler = 'tcp://127.0.0.1:1': no Dask scheduler answers|scheduler needs)"),
    (["select", "--op", "allgather", "--scheduler", "nowhere"], r"^hcsim: error: --scheduler = 'nowhere'"),
    (["sweep", "--op", "allreduce", "--workers", "2", "--scheduler", "tcp://127.0.0.1:1"],
     r"^hcsim: error: --workers = 2: give --workers .* not both"),
    (["sweep", "--op", "allreduce", "--workers", "two"], r"^hcsim: error: sweep: argument --workers"),
    (["sweep", "--op", "allreduce", "--progress=yes"], r"^hcsim: error: sweep: argument --progress"),
])
def test_cli_bad_parallel_flags_exit_2_in_one_line(argv, match, capsys):
    from hcsim.cli import main

    assert main([*argv, "-e", "16K"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1
    assert re.match(match, err), err


@needs_dask
def test_cli_sweep_on_a_cluster_prints_the_serial_table(client, capsys):
    from hcsim.cli import main

    # the module's cluster by its address (--workers starts one the same way as the fixture did)
    argv = ["sweep", "--op", "allgather", "-b", "1K", "-e", "64K", "--algo", "ring,mesh"]
    assert main(argv) == 0
    serial = capsys.readouterr()
    assert main([*argv, "--scheduler", client.scheduler.address, "--progress"]) == 0
    spread = capsys.readouterr()
    assert spread.out == serial.out and "mesh" in serial.out
    assert "sweep allgather" in spread.err  # the bar, on stderr only
    assert main(["select", "--op", "allgather", "-t", "atlas800t-a2", "-b", "1K", "-e", "64K"]) == 0
    serial = capsys.readouterr()
    assert main(["select", "--op", "allgather", "-t", "atlas800t-a2", "-b", "1K", "-e", "64K",
                 "--scheduler", client.scheduler.address, "--no-progress"]) == 0
    assert capsys.readouterr() == serial


def test_hcsim_error_stays_an_hcsim_error_through_pickling():
    import pickle

    exc = pickle.loads(pickle.dumps(ConfigError("size = 'x': a size")))
    assert isinstance(exc, HcsimError) and str(exc) == "size = 'x': a size"


def test_the_api_loads_neither_dask_nor_tqdm_until_asked():
    import subprocess

    code = ("import sys, hcsim, hcsim.api, hcsim.study, hcsim.parallel, hcsim.progress, hcsim.cli; "
            "hcsim.sweep('atlas800t-a2', 'allgather', ['1K'], ['ring'], progress=False); "
            "print(sorted(m for m in ('dask', 'distributed', 'tqdm') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("client", [True, "tcp://127.0.0.1:8786", object()])
def test_map_points_refuses_what_is_not_a_client_in_one_line(client):
    with pytest.raises(ConfigError, match=r"^client = .*: a dask.distributed.Client"):
        map_points(abs, [1, -2], client=client)


def test_a_local_cluster_is_bounded_by_the_machine(monkeypatch):
    """--workers 100000 would start that many interpreters; it is refused before any starts."""
    from hcsim import parallel

    monkeypatch.setattr(parallel.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert parallel.max_local_workers() == max(2, 2 * parallel.WORKERS_PER_CPU)
    with pytest.raises(ConfigError, match=rf"^--workers = 100000: at most {parallel.max_local_workers()} worker "
                       r"processes on this machine .* give --scheduler\)$"), dask_client(100_000, flags=True):
        pass
    # one worker per CPU: more would only add start-up (each about 1.5 s of CPU), never speed
    with pytest.raises(ConfigError, match=r"^--workers = 3: at most 2 worker processes"), dask_client(3, flags=True):
        pass


@needs_dask
def test_a_local_clusters_start_up_is_paid_from_the_commands_bound(client):
    """Each local worker costs WORK_PER_LOCAL_WORKER units before its first point: the points
    share what is left of max_work, and a bound the start-up alone passes is refused first."""
    from hcsim import parallel
    from hcsim.api import WorkBudget

    assert parallel.startup_work(client) == 2 * parallel.WORK_PER_LOCAL_WORKER
    assert parallel.startup_work(None) == 0
    assert WorkBudget(5_000_000, per_point=4, reserved=parallel.startup_work(client)).left() == 500_000
    with pytest.raises(hcsim.errors.WorkLimitError, match=r"^max_work = 2500000: starting the local cluster's "
                       r"workers alone costs about 3,000,000 units"):
        hcsim.sweep(_small_leaf_spine(), "allreduce", sizes=["1K"], algorithms=["ring"], client=client,
                    max_work=2_500_000)
    # the same bound on no cluster runs the point
    assert hcsim.sweep(_small_leaf_spine(), "allreduce", sizes=["1K"], algorithms=["ring"],
                       max_work=2_500_000)["time_us"].notna().all()


@needs_dask
def test_something_that_is_not_a_dask_scheduler_is_a_one_line_error():
    """An HTTP server at the address: Dask's handshake reads its reply as a frame length (a
    MemoryError before), now one line."""
    import threading

    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(4)
        srv.settimeout(10)

        def answer():
            try:
                while True:
                    conn, _ = srv.accept()
                    with conn:
                        conn.sendall(b"HTTP/1.0 200 OK\r\n\r\nhello, not dask")
            except OSError:
                pass

        threading.Thread(target=answer, daemon=True).start()
        address = f"tcp://127.0.0.1:{srv.getsockname()[1]}"
        with pytest.raises(ConfigError, match=rf"^scheduler = '{address}': no Dask scheduler answers there") as info, \
                dask_client(scheduler=address):
            pass
        assert "\n" not in str(info.value)


@needs_dask
def test_the_error_raised_is_the_first_failing_point_in_order(client):
    """Point 0 fails after 1.5 s, point 1 at once: the serial loop raises point 0's error, and so
    does the cluster (it raised whichever failure finished first)."""
    import time

    def slow_size(item):
        time.sleep(item[0])
        return parse_size(item[1])

    items = [(1.5, "first"), (0.0, "second"), (0.0, "1K")]
    with pytest.raises(ConfigError, match=r"^size = 'first'"):
        map_points(slow_size, items)
    with pytest.raises(ConfigError, match=r"^size = 'first'"):
        map_points(slow_size, items, client=client)
