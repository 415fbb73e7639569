#define _GNU_SOURCE
#include "CSluiceTestSupport.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <unistd.h>

int sluice_test_pipe(int ends[2]) {
    return pipe2(ends, O_CLOEXEC) == 0 ? 0 : errno;
}

// Tests start `sluice-echo` and `redis-server` with this rather than Foundation's `Process`:
// under AddressSanitizer, `Process.run` overflows a buffer inside the toolchain's Foundation
// while it looks for the highest open descriptor, and the run aborts.
int sluice_test_spawn(
    const char *path, char *const *argv, char *const *envp, int stdout_fd, int stderr_fd, pid_t *pid) {
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attributes;
    int failure = posix_spawn_file_actions_init(&actions);
    if (failure != 0) return failure;
    failure = posix_spawnattr_init(&attributes);
    if (failure != 0) {
        posix_spawn_file_actions_destroy(&actions);
        return failure;
    }

    failure = posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    if (failure == 0) {
        failure = stdout_fd >= 0 ? posix_spawn_file_actions_adddup2(&actions, stdout_fd, 1)
                                 : posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    }
    if (failure == 0) {
        failure = stderr_fd >= 0 ? posix_spawn_file_actions_adddup2(&actions, stderr_fd, 2)
                                 : posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    }
    // The test process's sockets and pipes stay out of the child: a listening socket inherited
    // by a server that outlives its test would keep the port.
    if (failure == 0) failure = posix_spawn_file_actions_addclosefrom_np(&actions, 3);

    sigset_t empty, defaults;
    sigemptyset(&empty);
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGPIPE);
    sigaddset(&defaults, SIGTERM);
    sigaddset(&defaults, SIGINT);
    sigaddset(&defaults, SIGCHLD);
    if (failure == 0) failure = posix_spawnattr_setsigmask(&attributes, &empty);
    if (failure == 0) failure = posix_spawnattr_setsigdefault(&attributes, &defaults);
    if (failure == 0) failure = posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

    if (failure == 0) failure = posix_spawn(pid, path, &actions, &attributes, argv, envp);
    posix_spawnattr_destroy(&attributes);
    posix_spawn_file_actions_destroy(&actions);
    return failure;
}
