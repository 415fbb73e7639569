#define _GNU_SOURCE
#include "CSluiceShims.h"

#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <pthread.h>
#include <string.h>
#include <signal.h>

static _Thread_local void *sluice_current_loop = 0;

void *sluice_current_loop_get(void) {
    return sluice_current_loop;
}

void sluice_current_loop_set(void *loop) {
    sluice_current_loop = loop;
}

int64_t sluice_current_thread_id(void) {
    return (int64_t)syscall(SYS_gettid);
}

int64_t sluice_monotonic_nanoseconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t sluice_wall_clock_milliseconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t sluice_process_cpu_nanoseconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void sluice_block_sigpipe_on_current_thread(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set, 0);
}

void sluice_set_thread_name(const char *name) {
    char buffer[16];
    strncpy(buffer, name, sizeof buffer - 1);
    buffer[sizeof buffer - 1] = 0;
    pthread_setname_np(pthread_self(), buffer);
}
