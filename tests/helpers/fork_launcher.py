"""A command's interpreter, as the suite runs it: ``fork_launcher.py ADDRESS [--pid-fd FD] [-u] -m doubles ARGS...``
(or ``-m doubles.MODULE``).

torchrun starts each worker as ``$PYTHON_EXEC -u -m MODULE ARGS...``; helpers/preforked.py points ``PYTHON_EXEC`` at
a script running this file with ``python -S`` (nothing but the standard library: it starts in milliseconds), and
its ``popen`` starts this file for a ``python -m doubles`` command a test signals or kills. It hands its standard
streams (as file descriptors), directory, environment, arguments and the disposition of SIGINT it started with to
the preforked server listening at ADDRESS, which forks the command (with ``--pid-fd``, its pid is written to that
file descriptor); then it stands in for the command, the process its starter watches: it passes on the signals it
gets and ends as the command ended (its exit status, or killed by the same signal).
"""
import json
import os
import signal
import socket
import sys

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


def main() -> None:
    address, *args = sys.argv[1:]
    pid_fd = None
    if args[:1] == ["--pid-fd"]:
        pid_fd, args = int(args[1]), args[2:]
    unbuffered = args[:1] == ["-u"]
    args = args[unbuffered:]
    if args[:1] != ["-m"] or args[1:2] == [] or args[1].split(".")[0] != "doubles":
        sys.exit(f"fork_launcher.py runs `[-u] -m doubles[.MODULE] ...` only, not {args[:2]}")
    env = {name: value for name, value in os.environ.items() if name != "PYTHON_EXEC"}  # torchrun's, not the worker's
    # as a fresh interpreter would: SIGINT raises KeyboardInterrupt unless it was ignored when the process started
    request = {"module": args[1], "argv": args[2:], "cwd": os.getcwd(), "env": env, "unbuffered": unbuffered,
               "sigint_ignored": signal.getsignal(signal.SIGINT) is signal.SIG_IGN}
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.connect(address)
        socket.send_fds(server, [json.dumps(request).encode() + b"\n"], [0, 1, 2])
        replies = server.makefile("r", encoding="utf-8")
        pid = json.loads(replies.readline())["pid"]
        if pid_fd is not None:
            os.write(pid_fd, f"{pid}\n".encode())
            os.close(pid_fd)
        for signum in FORWARDED:
            signal.signal(signum, lambda received, _: os.kill(pid, received))
        reply = replies.readline()
    if not reply:
        sys.exit("the preforked server stopped before the command ended")
    status = json.loads(reply)["status"]
    if os.WIFSIGNALED(status):
        if os.WTERMSIG(status) != signal.SIGKILL:  # SIGKILL's action cannot be set (nor need be)
            signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    sys.exit(os.waitstatus_to_exitcode(status))


if __name__ == "__main__":
    main()
