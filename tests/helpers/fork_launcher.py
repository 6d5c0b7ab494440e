"""A torchrun worker's interpreter, as the suite runs it: ``fork_launcher.py ADDRESS -u -m doubles ARGS...``.

torchrun starts each worker as ``$PYTHON_EXEC -u -m MODULE ARGS...``; helpers/preforked.py points ``PYTHON_EXEC`` at
a script running this file with ``python -S`` (nothing but the standard library: it starts in milliseconds). It hands
its standard streams (as file descriptors), directory, environment and arguments to the preforked server listening
at ADDRESS, which forks the worker; then it stands in for the worker, the process torchrun watches: it passes on
the signals torchrun sends and ends as the worker ended (its exit status, or killed by the same signal).
"""
import json
import os
import signal
import socket
import sys

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


def main() -> None:
    address, *args = sys.argv[1:]
    if args[:3] != ["-u", "-m", "doubles"]:
        sys.exit(f"fork_launcher.py runs `-u -m doubles ...` only, not {args[:3]}")
    env = {name: value for name, value in os.environ.items() if name != "PYTHON_EXEC"}  # torchrun's, not the worker's
    request = {"argv": args[3:], "cwd": os.getcwd(), "env": env}
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.connect(address)
        socket.send_fds(server, [json.dumps(request).encode() + b"\n"], [0, 1, 2])
        replies = server.makefile("r", encoding="utf-8")
        pid = json.loads(replies.readline())["pid"]
        for signum in FORWARDED:
            signal.signal(signum, lambda received, _: os.kill(pid, received))
        reply = replies.readline()
    if not reply:
        sys.exit("the preforked server stopped before the worker ended")
    status = json.loads(reply)["status"]
    if os.WIFSIGNALED(status):
        signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    sys.exit(os.waitstatus_to_exitcode(status))


if __name__ == "__main__":
    main()
