"""The one place that decides how many threads a kernel uses.

``None`` (the default) means: ``OMP_NUM_THREADS`` when it is set to a positive integer,
otherwise the number of CPUs this process may run on. Negative values count back from that
number, as in scikit-learn: -1 is all CPUs, -2 all but one. Results never depend on the
choice; only speed does.
"""
import os
import warnings

_requested = None

# The most threads a kernel call starts, unless the process may run on more CPUs: each is a
# thread of the kernels' team (csrc/team.h) or of oneDNN's OpenMP with its own stack and
# scratch, libgomp crashes the process when it cannot create them, and past the CPUs they only
# add overhead.
MAX_THREADS = 1024


def _available_cpus():
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def most_threads():
    """The most threads a kernel may be asked to run on."""
    return max(MAX_THREADS, _available_cpus())


def _resolve(n):
    if n is None:
        env = os.environ.get("OMP_NUM_THREADS", "").strip()
        if env:
            try:
                value = int(env.split(",")[0])
            except ValueError:
                value = 0
            if value > most_threads():
                raise ValueError(f"OMP_NUM_THREADS: got {value}; expected at most "
                                 f"{most_threads()} threads (or set tfcompat.set_num_threads)")
            if value > 0:
                return value
        return _available_cpus()
    if isinstance(n, bool) or not isinstance(n, (int,)) and not hasattr(n, "__index__"):
        raise TypeError(f"num_threads: got {n!r} of type {type(n).__name__}; expected an int or None")
    n = int(n)
    if n == 0:
        raise ValueError("num_threads: got 0; expected a positive int, a negative int "
                         "(-1 = all CPUs) or None")
    if n < 0:
        if n < -_available_cpus():
            raise ValueError(f"num_threads: got {n}; expected -1 (all {_available_cpus()} CPUs) "
                             f"down to {-_available_cpus()} (one thread), a positive int or None")
        return _available_cpus() + 1 + n
    if n > most_threads():
        raise ValueError(f"num_threads: got {n}; expected at most {most_threads()} (this "
                         f"process may run on {_available_cpus()} CPUs)")
    return n


_listeners = []


def on_change(callback):
    """Call ``callback(threads)`` now and whenever the setting changes (the C entry keeps its
    own copy, which callers without the GIL read)."""
    _listeners.append(callback)
    callback(get_num_threads())


def set_num_threads(n):
    """Set the number of threads tfcompat's kernels use (``None`` restores the default)."""
    global _requested
    _resolve(n)  # validate now, so a bad value fails at the call that made it
    _requested = n
    for callback in _listeners:
        callback(get_num_threads())


def get_num_threads():
    """The number of threads the next kernel call will use."""
    n = _requested
    if not (type(n) is int and n > 0):   # else checked when it was set
        n = _resolve(n)
    if _threads_pid is not None and _threads_pid != os.getpid():
        return 1
    return n


# GNU OpenMP (the runtime of oneDNN, which some conv strategies run multithreaded) keeps its
# pool of threads across fork(): in a child forked after a team of threads ran, the next team
# waits for the parent's threads, which the child does not have, for ever. There a kernel runs
# on one thread (libgomp starts no team for one), with the same bits; a child of a process that
# never ran a team may run any number. (The kernels' own team starts again in a child:
# csrc/team.h.)
_threads_pid = None     # the process whose kernel calls may have run a team of threads
_fork_warned = False


def kernel_threads():
    """get_num_threads() for a kernel call about to run: notes that this process may now run a
    team of threads, and warns once in a forked child whose request it reduces to one."""
    global _threads_pid, _fork_warned
    n = get_num_threads()
    if n > 1 and _threads_pid is None:
        _threads_pid = os.getpid()
    elif n == 1 and _threads_pid is not None and not _fork_warned and _threads_pid != os.getpid():
        _fork_warned = True
        if _resolve(_requested) > 1:
            warnings.warn("tfcompat: this process was forked after tfcompat ran on several "
                          "threads, where GNU OpenMP (oneDNN's) cannot start threads again; its kernels "
                          "run on one thread here (same results). Use multiprocessing's "
                          "'spawn' or 'forkserver' start method for more.", RuntimeWarning,
                          stacklevel=3)
    return n

