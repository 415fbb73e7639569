#ifndef SLUICE_CLIBEVENT_SHIM_H
#define SLUICE_CLIBEVENT_SHIM_H

// event2/event-config.h defines _GNU_SOURCE; the system headers must come first or the module
// fails to build with an fd_set mismatch.
#include <sys/types.h>
#include <sys/time.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/thread.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#endif
