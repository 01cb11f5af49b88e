"""A Ctrl-C or SIGTERM that lands after the step ended (during the interpreter's teardown) must
not print a traceback or turn a finished step's exit status into 130/143."""
import gc
import os
import signal

from wscat import cli


def test_console_ignores_signals_once_the_step_ended(monkeypatch):
    monkeypatch.setattr(cli, "main", lambda argv=None: 0)
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        assert cli.console() == 0
        # before the fix: KeyboardInterrupt here (torch's atexit handler's traceback in a real run)
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        gc.unfreeze()
