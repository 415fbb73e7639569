#ifndef SLUICE_CSLUICESHIMS_H
#define SLUICE_CSLUICESHIMS_H

#include <stdint.h>

/// The loop that owns the calling thread, or NULL. Kept in a C `_Thread_local` behind
/// out-of-line functions: glibc marks `pthread_self()` `const`, so a Swift thread check built on
/// it may be hoisted across an `await` and lie.
void *_Nullable sluice_current_loop_get(void);

/// Sets the loop that owns the calling thread (NULL to clear).
void sluice_current_loop_set(void *_Nullable loop);

/// The calling thread's kernel id (gettid), for diagnostics and tests.
int64_t sluice_current_thread_id(void);

/// Names the calling thread (at most 15 bytes are kept).
void sluice_set_thread_name(const char *_Nonnull name);

/// Blocks SIGPIPE on the calling thread, so a write to a socket whose peer has gone fails with
/// EPIPE instead of killing the process (the signal's default action). Thread-local: the
/// process's own disposition of SIGPIPE is left as the embedding program set it. Linux directs
/// the signal at the writing thread, so this suffices there; Darwin signals the process, so
/// sockets there also get SO_NOSIGPIPE. Threads and processes started from a blocked thread
/// inherit the mask: a child that should die of SIGPIPE must unblock it.
void sluice_block_sigpipe_on_current_thread(void);

/// CLOCK_MONOTONIC in nanoseconds.
int64_t sluice_monotonic_nanoseconds(void);

/// CLOCK_REALTIME in whole milliseconds since the Unix epoch.
int64_t sluice_wall_clock_milliseconds(void);

/// CPU time (user + system) this process has used, in nanoseconds.
int64_t sluice_process_cpu_nanoseconds(void);

#endif
