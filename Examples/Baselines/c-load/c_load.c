/*
 * c-load: a minimal closed-loop load client for line echo servers (the echo comparison's driver).
 *
 * Opens --connections connections; each keeps --depth lines in flight: it sends --depth lines,
 * then one new line for every echoed line it gets back, until --lines lines in total have been
 * echoed. Every line is --line-bytes bytes including its LF. Replies are checked: every byte
 * echoed must equal the byte sent at that position of the stream (so a lost, reordered,
 * truncated or altered line fails the run). Single thread, libevent bufferevents.
 *
 *   c-load [--host 127.0.0.1] --port P [--connections 16] [--depth 16] [--line-bytes 64]
 *          [--lines 1000000]
 *
 * Prints one line: `lines=<n> seconds=<s> lines_per_second=<r>`; exits 1 on a failed check.
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
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/util.h>

struct connection {
    struct bufferevent *bev;
    unsigned long long received; /* bytes echoed back so far */
};

static struct event_base *base;
static long line_bytes = 64;
static long long total_lines = 1000000;
static long long lines_sent;
static long long lines_done;
static int failed;
static char *line; /* line_bytes bytes: a printable pattern ending in LF */
static int open_connections;

/* The byte at `offset` of every connection's stream. */
static inline char expected_byte(unsigned long long offset) {
    return line[offset % (unsigned long long)line_bytes];
}

static void fail(const char *message) {
    if (!failed) fprintf(stderr, "c-load: FAILED: %s\n", message);
    failed = 1;
    event_base_loopbreak(base);
}

static void send_lines(struct connection *c, long long count) {
    struct evbuffer *output = bufferevent_get_output(c->bev);
    for (long long i = 0; i < count && lines_sent < total_lines; i++) {
        evbuffer_add(output, line, (size_t)line_bytes);
        lines_sent++;
    }
}

static void on_read(struct bufferevent *bev, void *ctx) {
    struct connection *c = ctx;
    struct evbuffer *input = bufferevent_get_input(bev);
    size_t length = evbuffer_get_length(input);
    unsigned long long before = c->received;
    struct evbuffer_iovec chunks[16];
    size_t checked = 0;
    while (checked < length) {
        struct evbuffer_ptr at;
        evbuffer_ptr_set(input, &at, checked, EVBUFFER_PTR_SET);
        int n = evbuffer_peek(input, (ev_ssize_t)(length - checked), &at, chunks, 16);
        if (n <= 0) break;
        for (int i = 0; i < n && i < 16 && checked < length; i++) {
            const char *bytes = chunks[i].iov_base;
            size_t count = chunks[i].iov_len;
            if (count > length - checked) count = length - checked;
            for (size_t j = 0; j < count; j++) {
                if (bytes[j] != expected_byte(c->received + checked + j)) {
                    fail("an echoed byte differs from the byte sent");
                    return;
                }
            }
            checked += count;
        }
    }
    evbuffer_drain(input, length);
    c->received += length;
    long long completed = (long long)(c->received / (unsigned long long)line_bytes -
                                      before / (unsigned long long)line_bytes);
    lines_done += completed;
    if (lines_done >= total_lines) {
        event_base_loopbreak(base);
        return;
    }
    send_lines(c, completed);
}

static void on_event(struct bufferevent *bev, short what, void *ctx) {
    (void)bev;
    (void)ctx;
    if (what & BEV_EVENT_CONNECTED) return;
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
        open_connections--;
        if (lines_done < total_lines) fail("a connection closed before the run ended");
    }
}

static double seconds_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void usage(const char *name) {
    fprintf(stderr,
            "usage: %s [--host ADDRESS] --port PORT [--connections N] [--depth D] [--line-bytes B] "
            "[--lines L]\n",
            name);
}

static long long parse_number(const char *text, const char *option, long long minimum) {
    char *end;
    long long value = strtoll(text, &end, 10);
    if (*end != '\0' || value < minimum) {
        fprintf(stderr, "c-load: %s must be an integer >= %lld (got %s)\n", option, minimum, text);
        exit(2);
    }
    return value;
}

int main(int argc, char **argv) {
    const char *host = "127.0.0.1";
    long long port = -1, connections = 16, depth = 16;
    for (int i = 1; i < argc; i++) {
        const char *option = argv[i];
        if (strcmp(option, "--help") == 0 || strcmp(option, "-h") == 0) {
            usage(argv[0]);
            return 0;
        }
        if (i + 1 >= argc) {
            usage(argv[0]);
            return 2;
        }
        const char *value = argv[++i];
        if (strcmp(option, "--host") == 0) host = value;
        else if (strcmp(option, "--port") == 0) port = parse_number(value, option, 1);
        else if (strcmp(option, "--connections") == 0) connections = parse_number(value, option, 1);
        else if (strcmp(option, "--depth") == 0) depth = parse_number(value, option, 1);
        else if (strcmp(option, "--line-bytes") == 0) line_bytes = (long)parse_number(value, option, 2);
        else if (strcmp(option, "--lines") == 0) total_lines = parse_number(value, option, 1);
        else {
            usage(argv[0]);
            return 2;
        }
    }
    if (port < 1 || port > 65535) {
        usage(argv[0]);
        return 2;
    }

    line = malloc((size_t)line_bytes);
    for (long i = 0; i < line_bytes - 1; i++) line[i] = (char)('a' + i % 26);
    line[line_bytes - 1] = '\n';

    struct sockaddr_storage storage;
    int length = sizeof storage;
    char text[128];
    snprintf(text, sizeof text, strchr(host, ':') ? "[%s]:%lld" : "%s:%lld", host, port);
    if (evutil_parse_sockaddr_port(text, (struct sockaddr *)&storage, &length) != 0) {
        fprintf(stderr, "c-load: bad address %s\n", text);
        return 2;
    }

    signal(SIGPIPE, SIG_IGN);
    base = event_base_new();
    struct connection *all = calloc((size_t)connections, sizeof *all);
    for (long long i = 0; i < connections; i++) {
        struct bufferevent *bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
        if (bufferevent_socket_connect(bev, (struct sockaddr *)&storage, length) != 0) {
            fprintf(stderr, "c-load: cannot connect to %s\n", text);
            return 1;
        }
        int one = 1;
        setsockopt(bufferevent_getfd(bev), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        all[i].bev = bev;
        bufferevent_setcb(bev, on_read, NULL, on_event, &all[i]);
        bufferevent_enable(bev, EV_READ | EV_WRITE);
        open_connections++;
    }

    double start = seconds_now();
    /* Fill every connection's pipeline; bufferevents send once connected. */
    for (long long d = 0; d < depth; d++)
        for (long long i = 0; i < connections; i++) send_lines(&all[i], 1);
    event_base_dispatch(base);
    double elapsed = seconds_now() - start;

    for (long long i = 0; i < connections; i++) bufferevent_free(all[i].bev);
    event_base_free(base);
    if (failed) return 1;
    if (lines_done != total_lines) {
        fprintf(stderr, "c-load: FAILED: %lld of %lld lines echoed\n", lines_done, total_lines);
        return 1;
    }
    printf("lines=%lld seconds=%.3f lines_per_second=%.0f\n", lines_done, elapsed, (double)lines_done / elapsed);
    return 0;
}
