#ifndef SLUICE_CHIREDIS_SHIM_H
#define SLUICE_CHIREDIS_SHIM_H

// The libevent adapter includes event2/event.h, and event2/event-config.h defines _GNU_SOURCE:
// the system headers must come first or the module fails to build with an fd_set mismatch.
#include <sys/types.h>
#include <sys/time.h>
#include <sys/select.h>
#include <sys/socket.h>

#include <hiredis/hiredis.h>
#include <hiredis/async.h>
#include <hiredis/adapters/libevent.h>

/// Attaches an async context to a libevent base: `redisLibeventAttach`, which the adapter header
/// defines as a plain `static` function, behind a `static inline` one Swift imports.
/// Returns REDIS_OK, or REDIS_ERR when the context is already attached.
static inline int sluice_redis_libevent_attach(redisAsyncContext *_Nonnull context, struct event_base *_Nonnull base) {
    return redisLibeventAttach(context, base);
}

/// Whether hiredis has marked the context connected (its first write event arrived).
static inline int sluice_redis_is_connected(const redisAsyncContext *_Nonnull context) {
    return (context->c.flags & REDIS_CONNECTED) != 0;
}

/// The context's error text, or NULL when it has no error. Read from the inner context:
/// hiredis copies it to the async context's `errstr` only after the connect callback has run.
static inline const char *_Nullable sluice_redis_error_text(const redisAsyncContext *_Nonnull context) {
    return context->c.err != 0 ? context->c.errstr : 0;
}

#endif
