"""Progress bars (hcsim.progress): on stderr only when on, never on stdout, off under capture and
with HCSIM_PROGRESS=0, bad settings refused in one line; the engine's progress hook."""

import io
import sys
import types
import warnings

import pytest
import simpy

import hcsim
import hcsim.progress as progress_mod
from hcsim.algorithms import build_schedule
from hcsim.engine.des import EngineConfig, FlowSimulator
from hcsim.errors import ConfigError
from hcsim.parallel import map_points
from hcsim.progress import ENV_VAR, progress_bar, progress_enabled
from hcsim.topology import leaf_spine

try:
    import tqdm  # noqa: F401

    HAVE_TQDM = True
except ImportError:
    HAVE_TQDM = False
needs_tqdm = pytest.mark.skipif(not HAVE_TQDM, reason="tqdm is not installed (pip install 'hcsim[progress]')")


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def _contended():
    return leaf_spine(4, 4, 2, 25e9, 1e-6)  # 16 NPUs, 4 leaves, 2 spines: flows meet on uplinks (event-driven)


def test_auto_is_off_under_capture(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert not sys.stderr.isatty()  # pytest's capture (or a pipe)
    assert progress_enabled(None) is False
    assert progress_enabled(True) is True and progress_enabled(False) is False


def test_auto_is_on_at_a_terminal_unless_hcsim_progress_is_0(monkeypatch):
    monkeypatch.setattr(sys, "stderr", _Terminal())
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert progress_enabled(None) is True
    monkeypatch.setenv(ENV_VAR, "0")
    assert progress_enabled(None) is False
    assert progress_enabled(True) is True  # asked for explicitly
    monkeypatch.setenv(ENV_VAR, "1")
    assert progress_enabled(None) is True


def test_auto_is_on_in_a_jupyter_kernel(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    zmq_shell = type("ZMQInteractiveShell", (), {})
    terminal_shell = type("TerminalInteractiveShell", (), {})
    shell = [zmq_shell()]
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: shell[0]))
    assert progress_enabled(None) is True
    shell[0] = type("Shell", (zmq_shell,), {})()  # a kernel's subclass (as Colab's)
    assert progress_enabled(None) is True
    shell[0] = terminal_shell()  # IPython in a terminal: stderr decides, and it is captured here
    assert progress_enabled(None) is False
    shell[0] = None
    assert progress_enabled(None) is False
    shell[0] = zmq_shell()
    monkeypatch.setenv(ENV_VAR, "0")
    assert progress_enabled(None) is False


@pytest.mark.parametrize("bad", ["yes", 1, 0, "auto", [True]])
def test_bad_progress_values_are_refused_in_one_line(bad):
    expected = rf"^progress = {re_escape(repr(bad))}: None \(auto: on a terminal or in a notebook\), True or False$"
    for call in (lambda: progress_enabled(bad),
                 lambda: hcsim.simulate("atlas800t-a2", "allreduce", "1K", progress=bad),
                 lambda: hcsim.sweep("atlas800t-a2", "allreduce", ["1K"], progress=bad),
                 lambda: hcsim.select("atlas800t-a2", "allreduce", ["1K"], progress=bad),
                 lambda: map_points(abs, [1], progress=bad)):
        with pytest.raises(ConfigError, match=expected):
            call()


def re_escape(text):
    import re

    return re.escape(text)


def test_a_bad_total_is_refused():
    with pytest.raises(ConfigError, match=r"^total = -1: a count"), progress_bar(-1, "x", progress=True):
        pass


def test_nothing_is_printed_under_capture_by_default(capsys, monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    hcsim.simulate(_contended(), "allreduce", "1M", "ring")
    hcsim.sweep("atlas800t-a2", "allgather", ["1K", "64K"], ["ring", "mesh"])
    hcsim.select("atlas800t-a2", "allgather", ["1K", "64K"])
    out, err = capsys.readouterr()
    assert out == "" and err == ""


@needs_tqdm
def test_a_forced_bar_goes_to_stderr_and_changes_nothing(capsys):
    topo = _contended()
    quiet = hcsim.simulate(topo, "allreduce", "1M", "ring", progress=False)
    loud = hcsim.simulate(topo, "allreduce", "1M", "ring", progress=True)
    out, err = capsys.readouterr()
    assert out == ""
    assert "allreduce ring" in err and "/30 [" in err  # 2 (p - 1) steps
    assert loud.time_s == quiet.time_s and loud.config == quiet.config

    kw = dict(sizes=["1K", "64K"], algorithms=["ring", "mesh"])
    df = hcsim.sweep("atlas800t-a2", "allgather", progress=True, **kw)
    out, err = capsys.readouterr()
    assert out == "" and "sweep allgather" in err and "/4 [" in err
    assert df.equals(hcsim.sweep("atlas800t-a2", "allgather", progress=False, **kw))

    hcsim.select("atlas800t-a2", "allgather", ["1K", "64K"], progress=True)
    out, err = capsys.readouterr()
    assert out == "" and "select allgather" in err and "/2 [" in err


class _Recorder:
    """Stands in for tqdm's class: records what a bar was asked to show."""

    bars: list = []

    def __init__(self, total, desc, file, **kw):
        self.total, self.desc, self.file, self.kw, self.n, self.closed = total, desc, file, kw, 0, False
        _Recorder.bars.append(self)

    def update(self, n=1):
        self.n += n

    def close(self):
        self.closed = True


@pytest.mark.parametrize("progress, delay", [(True, 0.0), (None, progress_mod.AUTO_DELAY_S)])
def test_bars_count_every_unit_to_the_end(monkeypatch, progress, delay):
    monkeypatch.setattr(progress_mod, "_tqdm_class", lambda: _Recorder)
    monkeypatch.setattr(sys, "stderr", _Terminal())  # auto: a terminal
    monkeypatch.delenv(ENV_VAR, raising=False)
    _Recorder.bars = []
    hcsim.simulate(_contended(), "allreduce", "1M", "ring", progress=progress)
    hcsim.sweep("atlas800t-a2", "allgather", ["1K", "64K"], ["ring", "mesh"], progress=progress)
    hcsim.select("atlas800t-a2", "allgather", ["1K", "64K"], progress=progress)
    # one bar each: the sweep's and the study's points run without bars of their own
    assert [(b.desc, b.total, b.n) for b in _Recorder.bars] == [
        ("allreduce ring", 30, 30), ("sweep allgather", 4, 4), ("select allgather", 2, 2)]
    assert all(b.closed and b.file is sys.stderr and b.kw["delay"] == delay for b in _Recorder.bars)


@needs_tqdm
def test_a_bar_at_a_terminal_shows_an_eta(monkeypatch):
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    with progress_bar(4, "points", progress=True) as bar:
        assert bar.enabled
        bar.update()
        bar.update(3)
    text = terminal.getvalue()
    assert "points" in text and "<" in text  # tqdm's [elapsed<remaining] is the ETA


def test_without_tqdm_a_forced_bar_warns_once_and_does_nothing(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # import tqdm -> ImportError
    monkeypatch.setattr(progress_mod, "_warned_missing", False)
    with pytest.warns(RuntimeWarning, match=r"^progress=True: tqdm is not installed") as caught:
        with progress_bar(3, "x", progress=True) as bar:
            bar.update()
    assert not bar.enabled and len(caught) == 1 and "\n" not in str(caught[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second bar says nothing more
        with progress_bar(3, "x", progress=True):
            pass
    assert capsys.readouterr() == ("", "")


def test_the_engine_reports_finished_steps():
    topo = _contended()
    schedule = build_schedule("allreduce", "ring", 16, 1 << 20)
    seen = []
    sim = FlowSimulator(topo, topo.npus, schedule, EngineConfig())
    sim.on_progress = seen.append
    t = sim.run(simpy.Environment())  # the event-driven run
    assert not sim.contention_free and seen
    assert seen == sorted(seen) and seen[-1] == len(schedule.steps) == 30
    plain = FlowSimulator(topo, topo.npus, schedule, EngineConfig())
    assert plain.on_progress is None and plain.run(simpy.Environment()) == t
    lone = FlowSimulator(topo, topo.npus, schedule, EngineConfig())
    passed = []
    lone.on_progress = passed.append
    assert lone.run() == pytest.approx(t, rel=1e-9) and lone.contention_free  # the contention-free pass reports too
    assert passed == list(range(1, 31))


def test_the_contention_free_pass_reports_its_steps_and_a_restart():
    from hcsim.topology import full_mesh

    topo = full_mesh(4, 1e9)  # never contended: the one-pass run
    schedule = build_schedule("allgather", "ring", 4, 4000)
    seen = []
    sim = FlowSimulator(topo, topo.npus, schedule, EngineConfig(record=False))
    sim.on_progress = seen.append
    sim.run()
    assert sim.contention_free and seen == [1, 2, 3]

    topo = _contended()  # contended: the pass gives up, says 0, and the event-driven run counts again
    schedule = build_schedule("alltoall", "pairwise", 16, 16 << 20)
    seen = []
    sim = FlowSimulator(topo, topo.npus, schedule, EngineConfig(record=False))
    sim.on_progress = seen.append
    sim.run()
    assert not sim.contention_free
    restart = seen.index(0)
    assert seen[:restart] == list(range(1, restart + 1))  # the pass's own steps, before it gave up
    after = seen[restart + 1:]
    assert after and after == sorted(after) and after[-1] == len(schedule.steps)


def test_cli_never_prints_a_bar_on_stdout(capsys):
    from hcsim.cli import main

    assert main(["sweep", "--op", "allgather", "-b", "1K", "-e", "4K", "--algo", "ring"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and "%|" not in out and "ring" in out
    if HAVE_TQDM:
        assert main(["sweep", "--op", "allgather", "-b", "1K", "-e", "4K", "--algo", "ring", "--progress"]) == 0
        out2, err2 = capsys.readouterr()
        assert out2 == out and "sweep allgather" in err2


@pytest.mark.parametrize("value", ["false", "OFF", "no", " 0 "])
def test_hcsim_progress_false_off_or_no_turns_bars_off(monkeypatch, value):
    """HCSIM_PROGRESS=false used to count as 'not 0', so it turned bars on at a terminal."""
    monkeypatch.setattr(sys, "stderr", _Terminal())
    monkeypatch.setenv(ENV_VAR, value)
    assert progress_enabled(None) is False


@pytest.mark.parametrize("value", ["1", "true", "Yes", "on", ""])
def test_hcsim_progress_1_true_yes_or_on_leave_bars_automatic(monkeypatch, value):
    monkeypatch.setenv(ENV_VAR, value)
    assert progress_enabled(None) is False  # captured here: auto stays off
    monkeypatch.setattr(sys, "stderr", _Terminal())
    assert progress_enabled(None) is True


def test_an_unknown_hcsim_progress_value_is_one_line(monkeypatch, capsys):
    monkeypatch.setenv(ENV_VAR, "sometimes")
    with pytest.raises(ConfigError, match=r"^HCSIM_PROGRESS = 'sometimes': 0 \(or false, no, off"):
        progress_enabled(None)
    assert progress_enabled(False) is False and progress_enabled(True) is True  # the variable is not read
    from hcsim.cli import main

    assert main(["sweep", "--op", "allreduce", "-e", "16K"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("hcsim: error: HCSIM_PROGRESS = 'sometimes'") and err.count("\n") == 1
