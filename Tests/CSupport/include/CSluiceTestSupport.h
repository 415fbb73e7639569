#ifndef SLUICE_CSLUICETESTSUPPORT_H
#define SLUICE_CSLUICETESTSUPPORT_H

#include <sys/types.h>

/// Starts `path` with `argv` (NULL-terminated, argv[0] included) and `envp` as a child process
/// with posix_spawn: standard input from /dev/null; standard output and standard error to
/// `stdout_fd` and `stderr_fd`, or to /dev/null where one is -1; every other descriptor closed;
/// the signal mask emptied and SIGPIPE, SIGTERM, SIGINT and SIGCHLD at their defaults (a test
/// thread may have blocked SIGPIPE, and a child inherits the mask).
///
/// Returns 0 and stores the child's id in `pid`, or an errno value.
int sluice_test_spawn(
    const char *_Nonnull path, char *_Nullable const *_Nonnull argv, char *_Nullable const *_Nonnull envp,
    int stdout_fd, int stderr_fd, pid_t *_Nonnull pid);

/// A pipe whose two ends are close-on-exec (pipe2 with O_CLOEXEC): 0, or an errno value.
int sluice_test_pipe(int ends[_Nonnull 2]);

#endif
