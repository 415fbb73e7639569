/*
 * c-echo: a plain C libevent line echo server, the baseline sluice-echo is measured against.
 *
 * Single thread, one event_base, one bufferevent per connection. On each read callback it
 * moves every complete line (up to and including its LF) from the input evbuffer to the output
 * evbuffer without copying (evbuffer_search_eol + evbuffer_remove_buffer); an incomplete line
 * stays in the input until more bytes arrive. Like sluice-echo it stops reading a connection
 * whose output is above a high watermark and resumes below a low one.
 *
 * Like sluice-echo, a connection that sends nothing for --idle-timeout-s seconds (default 300,
 * 0: never) is closed, so both servers pay for the same per-read timeout bookkeeping.
 *
 *   c-echo [--host 127.0.0.1] [--port 7071] [--idle-timeout-s 300]
 */
#include <sys/types.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/util.h>

#define HIGH_WATERMARK (1 << 20)
#define LOW_WATERMARK (256 << 10)

static long idle_timeout_seconds = 300;

static void on_read(struct bufferevent *bev, void *ctx) {
    (void)ctx;
    struct evbuffer *input = bufferevent_get_input(bev);
    struct evbuffer *output = bufferevent_get_output(bev);
    for (;;) {
        struct evbuffer_ptr eol = evbuffer_search_eol(input, NULL, NULL, EVBUFFER_EOL_LF);
        if (eol.pos < 0) break;
        evbuffer_remove_buffer(input, output, (size_t)eol.pos + 1);
        if (evbuffer_get_length(output) > HIGH_WATERMARK) {
            bufferevent_disable(bev, EV_READ);
            break;
        }
    }
}

static void on_write(struct bufferevent *bev, void *ctx) {
    /* Runs when the output drained to LOW_WATERMARK. */
    if (!(bufferevent_get_enabled(bev) & EV_READ)) {
        bufferevent_enable(bev, EV_READ);
        on_read(bev, ctx);
    }
}

static void on_event(struct bufferevent *bev, short what, void *ctx) {
    (void)ctx;
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)) bufferevent_free(bev);
}

static void on_accept(struct evconnlistener *listener, evutil_socket_t fd, struct sockaddr *address,
                      int length, void *ctx) {
    (void)address;
    (void)length;
    (void)ctx;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct event_base *base = evconnlistener_get_base(listener);
    struct bufferevent *bev = bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE);
    if (!bev) {
        evutil_closesocket(fd);
        return;
    }
    bufferevent_setcb(bev, on_read, on_write, on_event, NULL);
    bufferevent_setwatermark(bev, EV_WRITE, LOW_WATERMARK, 0);
    if (idle_timeout_seconds > 0) {
        struct timeval idle = {.tv_sec = idle_timeout_seconds, .tv_usec = 0};
        bufferevent_set_timeouts(bev, &idle, NULL);
    }
    bufferevent_enable(bev, EV_READ | EV_WRITE);
}

static void on_signal(evutil_socket_t signal, short what, void *ctx) {
    (void)signal;
    (void)what;
    event_base_loopbreak((struct event_base *)ctx);
}

static void usage(const char *name) {
    fprintf(stderr, "usage: %s [--host ADDRESS] [--port PORT] [--idle-timeout-s SECONDS]\n", name);
}

int main(int argc, char **argv) {
    const char *host = "127.0.0.1";
    int port = 7071;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--port") == 0 && i + 1 < argc) {
            char *end;
            long value = strtol(argv[++i], &end, 10);
            if (*end != '\0' || value < 0 || value > 65535) {
                fprintf(stderr, "c-echo: --port must be 0...65535\n");
                return 2;
            }
            port = (int)value;
        } else if (strcmp(argv[i], "--idle-timeout-s") == 0 && i + 1 < argc) {
            char *end;
            idle_timeout_seconds = strtol(argv[++i], &end, 10);
            if (*end != '\0' || idle_timeout_seconds < 0) {
                fprintf(stderr, "c-echo: --idle-timeout-s must be 0 or more\n");
                return 2;
            }
        } else if (strcmp(argv[i], "--host") == 0 && i + 1 < argc) {
            host = argv[++i];
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(argv[0]);
            return 0;
        } else {
            usage(argv[0]);
            return 2;
        }
    }

    struct sockaddr_storage storage;
    int length = sizeof storage;
    char text[128];
    snprintf(text, sizeof text, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
    if (evutil_parse_sockaddr_port(text, (struct sockaddr *)&storage, &length) != 0) {
        fprintf(stderr, "c-echo: bad address %s\n", text);
        return 2;
    }

    signal(SIGPIPE, SIG_IGN);
    struct event_base *base = event_base_new();
    if (!base) {
        fprintf(stderr, "c-echo: event_base_new failed\n");
        return 1;
    }
    struct evconnlistener *listener = evconnlistener_new_bind(
        base, on_accept, NULL, LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 1024,
        (struct sockaddr *)&storage, length);
    if (!listener) {
        perror("c-echo: cannot listen");
        return 1;
    }
    struct event *sigint = evsignal_new(base, SIGINT, on_signal, base);
    struct event *sigterm = evsignal_new(base, SIGTERM, on_signal, base);
    event_add(sigint, NULL);
    event_add(sigterm, NULL);
    fprintf(stderr, "c-echo: listening on %s\n", text);

    event_base_dispatch(base);

    event_free(sigint);
    event_free(sigterm);
    evconnlistener_free(listener);
    event_base_free(base);
    return 0;
}
