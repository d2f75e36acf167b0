"""Ctrl-C and SIGTERM stop a command cleanly, also inside a section that must not be cut (an extension
module's first import): the signal is raised when the section ends. Signals are sent in child processes,
so that no test worker receives one."""

from __future__ import annotations

import argparse
import subprocess
import sys
import textwrap

import pytest

from factorbench.benchmark import cli
from factorbench.generators.interrupts import caused_by_interrupt


def _run_child(body: str) -> subprocess.CompletedProcess:
    code = textwrap.dedent("""
        import os, signal, sys
        from factorbench.generators.interrupts import interrupts_deferred, stopping_on_signals
        # as in a terminal: a child of a process that ignores SIGINT (a test worker, a job started with &)
        # inherits the ignoring, which stopping_on_signals rightly leaves alone
        signal.signal(signal.SIGINT, signal.default_int_handler)

        def signal_self(sig):
            # send sig to this process, then run bytecodes: the handler has had its chance to act
            os.kill(os.getpid(), sig)
            for _ in range(10000):
                pass
    """) + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_signal_inside_a_deferring_section_is_raised_when_it_ends(sig):
    proc = _run_child(f"""
        steps = []
        with stopping_on_signals():
            try:
                with interrupts_deferred():
                    signal_self(signal.{sig})
                    steps.append("section finished")
                steps.append("after the section")
            except KeyboardInterrupt:
                steps.append("interrupt")
        print(steps)
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['section finished', 'interrupt']"


def test_outside_a_section_sigterm_interrupts_at_once_and_the_handlers_are_restored():
    proc = _run_child("""
        before = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
        steps = []
        with stopping_on_signals():
            try:
                signal_self(signal.SIGTERM)
                steps.append("not interrupted")
            except KeyboardInterrupt:
                steps.append("interrupt")
        print(steps, (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before)
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['interrupt'] True"


def test_a_handler_of_its_own_is_left_alone():
    proc = _run_child("""
        seen = []
        signal.signal(signal.SIGTERM, lambda s, f: seen.append(s))
        with stopping_on_signals():
            with interrupts_deferred():
                pass
            signal_self(signal.SIGTERM)
        print(seen == [signal.SIGTERM])
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "True"


def test_nested_sections_raise_once_at_the_outermost_end():
    proc = _run_child("""
        steps = []
        with stopping_on_signals():
            try:
                with interrupts_deferred():
                    with interrupts_deferred():
                        signal_self(signal.SIGTERM)
                    steps.append("inner ended")
                steps.append("outer ended")
            except KeyboardInterrupt:
                steps.append("interrupt")
            with interrupts_deferred():
                steps.append("a later section runs")
        print(steps)
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['inner ended', 'interrupt', 'a later section runs']"


def _import_error_from_interrupt() -> ImportError:
    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:
            raise ImportError("initialization failed") from exc
    except ImportError as exc:
        return exc


def test_caused_by_interrupt_follows_causes_and_contexts():
    assert caused_by_interrupt(KeyboardInterrupt())
    assert caused_by_interrupt(_import_error_from_interrupt())
    outer = RuntimeError("outer")
    outer.__context__ = _import_error_from_interrupt()
    assert caused_by_interrupt(outer)
    assert not caused_by_interrupt(ImportError("no module named x"))
    a, b = ValueError("a"), ValueError("b")
    a.__context__, b.__context__ = b, a  # a cycle ends
    assert not caused_by_interrupt(a)


def test_a_command_whose_import_was_cut_by_ctrl_c_reports_an_interrupt(capsys):
    def cut(args: argparse.Namespace) -> int:
        raise _import_error_from_interrupt()

    def failed(args: argparse.Namespace) -> int:
        raise ImportError("no module named x")

    assert cli._run(argparse.Namespace(command="leaderboard", run=cut)) == 130
    assert capsys.readouterr().err == "factorbench leaderboard: interrupted\n"
    with pytest.raises(ImportError, match="no module named x"):  # a real failure stays one
        cli._run(argparse.Namespace(command="leaderboard", run=failed))

    def interrupted(args: argparse.Namespace) -> int:
        raise KeyboardInterrupt

    def exits(args: argparse.Namespace) -> int:
        raise SystemExit(3)

    assert cli._run(argparse.Namespace(command="leaderboard", run=interrupted)) == 130
    assert capsys.readouterr().err == "factorbench leaderboard: interrupted\n"
    with pytest.raises(SystemExit):  # not an interrupt: passes through
        cli._run(argparse.Namespace(command="leaderboard", run=exits))


def test_a_section_in_another_thread_defers_nothing():
    proc = _run_child("""
        import threading
        steps = []
        inside, release = threading.Event(), threading.Event()

        def worker():
            with interrupts_deferred():
                inside.set()
                release.wait(10)

        with stopping_on_signals():
            thread = threading.Thread(target=worker)
            thread.start()
            inside.wait(10)
            try:
                signal_self(signal.SIGTERM)
                steps.append("not interrupted")
            except KeyboardInterrupt:
                steps.append("interrupt")
            release.set()
            thread.join()
        print(steps)
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['interrupt']"


def test_an_ignored_sigint_stays_ignored():
    """A command started in the background by a shell (`cmd &`) ignores Ctrl-C; it keeps doing so."""
    proc = _run_child("""
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        with stopping_on_signals():
            with interrupts_deferred():
                signal_self(signal.SIGINT)
            print(signal.getsignal(signal.SIGINT) == signal.SIG_IGN)
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "True"
