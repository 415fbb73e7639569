/*
 * evhttp-tap: a plain C HTTP server on libevent's evhttp answering POST /tap/<key>, the C
 * baseline for sluice-echo's HTTP front (same route, same decisions, same bytes; the Swift
 * framework baseline is hummingbird-tap in Examples/Benchmarks/Sources/HummingbirdTap).
 *
 * One thread, one event_base, one evhttp; keep-alive as evhttp does by default.
 *
 * A per-key leading-edge throttle: a tap for key k at time t runs iff none ran in
 * (t - window, t]. An open-addressing hash table (FNV-1a, linear probing, load <= 1/2) maps each
 * key to the last time a tap of it ran (CLOCK_MONOTONIC) and the number of its taps that ran;
 * every request does one lookup. Past MAX_KEYS keys, a new key first drops the entries older
 * than the window (and the table waits for twice what survived before it tries again).
 *
 *   200  Content-Type: application/json                {"tap":<n>}
 *        RateLimit-Policy: "tap";q=1;w=<w>   RateLimit: "tap";r=0;t=<w>
 *   429  Content-Type: application/problem+json        the "throttled" problem below
 *        Retry-After: <r>   RateLimit-Policy: "tap";q=1;w=<w>   RateLimit: "tap";r=0;t=<r>
 *   400  the "bad-key" problem: a key that is not 1-128 bytes of visible ASCII (0x21-0x7E)
 *   405  the "method-not-allowed" problem (Allow: POST): another method on /tap/...
 *   404  the "not-found" problem: any other path
 *
 * w = the window in whole seconds, rounded up, at least 1; r = the time until the key may run
 * again in whole seconds, rounded up, at least 1. The key is the rest of the path after /tap/,
 * percent-decoded. The bytes are sluice-echo's: the same fields, bodies and problem details.
 *
 * --changelist creates the event base with EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST, as sluice-echo's
 * loops are: libevent then batches epoll changes per loop iteration (evhttp stops and resumes
 * reading around every request). Without it the base is libevent's default, as a plain server's.
 *
 *   evhttp-tap [--host 127.0.0.1] [--port 8081] [--window-ms 1000] [--changelist]
 */
#include <sys/types.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/util.h>

#ifndef MAX_KEYS
#define MAX_KEYS (1u << 20)
#endif
#define MAX_KEY_BYTES 128

static const char THROTTLED[] =
    "{\"type\":\"urn:sluice:problem:throttled\",\"title\":\"Too Many Requests\",\"status\":429,"
    "\"detail\":\"this key was used less than a window ago\"}";
static const char BAD_KEY[] =
    "{\"type\":\"urn:sluice:problem:bad-key\",\"title\":\"Bad Request\",\"status\":400,"
    "\"detail\":\"a key is 1 to 128 bytes of visible ASCII, percent-encoded in a path\"}";
static const char METHOD_NOT_ALLOWED[] =
    "{\"type\":\"urn:sluice:problem:method-not-allowed\",\"title\":\"Method Not Allowed\",\"status\":405,"
    "\"detail\":\"this path answers POST\"}";

struct entry {
    uint64_t hash;
    uint64_t last; /* ns, CLOCK_MONOTONIC, of the last tap that ran */
    uint64_t count; /* taps that ran */
    size_t length;
    char key[];
};

struct table {
    struct entry **slots;
    size_t mask; /* capacity - 1, capacity a power of two */
    size_t count;
    size_t prune_at;
};

static struct table table;
static uint64_t window_ns;
static long window_s;
static char policy[64]; /* "tap";q=1;w=<w> */
static char limit_ok[64]; /* "tap";r=0;t=<w> */
static struct evbuffer *body;

static uint64_t now_ns(void) {
    struct timespec spec;
    clock_gettime(CLOCK_MONOTONIC, &spec);
    return (uint64_t)spec.tv_sec * 1000000000u + (uint64_t)spec.tv_nsec;
}

static uint64_t hash_key(const char *key, size_t length) {
    uint64_t hash = 14695981039346656037u;
    for (size_t i = 0; i < length; i++) {
        hash ^= (unsigned char)key[i];
        hash *= 1099511628211u;
    }
    return hash;
}

static void table_init(struct table *t, size_t capacity) {
    t->slots = calloc(capacity, sizeof *t->slots);
    if (!t->slots) {
        perror("evhttp-tap: calloc");
        exit(1);
    }
    t->mask = capacity - 1;
    t->count = 0;
    if (t->prune_at == 0) t->prune_at = MAX_KEYS;
}

/* Puts an entry known to be absent into its slot. */
static void table_place(struct table *t, struct entry *e) {
    size_t i = (size_t)e->hash & t->mask;
    while (t->slots[i]) i = (i + 1) & t->mask;
    t->slots[i] = e;
    t->count++;
}

/* Rebuilds the table at `capacity` slots; with `now` != 0 it drops the entries older than the
 * window on the way. */
static void table_rebuild(struct table *t, size_t capacity, uint64_t now) {
    struct entry **old = t->slots;
    size_t old_capacity = t->mask + 1;
    table_init(t, capacity);
    for (size_t i = 0; i < old_capacity; i++) {
        struct entry *e = old[i];
        if (!e) continue;
        if (now != 0 && now - e->last >= window_ns) {
            free(e);
        } else {
            table_place(t, e);
        }
    }
    free(old);
}

/* The slot of `key`: its entry, or the empty slot where it would go. */
static struct entry **table_find(struct table *t, const char *key, size_t length, uint64_t hash) {
    size_t i = (size_t)hash & t->mask;
    for (;;) {
        struct entry *e = t->slots[i];
        if (!e || (e->hash == hash && e->length == length && memcmp(e->key, key, length) == 0)) return &t->slots[i];
        i = (i + 1) & t->mask;
    }
}

static struct entry *table_insert(struct table *t, const char *key, size_t length, uint64_t hash, uint64_t now) {
    if (t->count >= t->prune_at) {
        table_rebuild(t, t->mask + 1, now);
        t->prune_at = 2 * t->count > MAX_KEYS ? 2 * t->count : MAX_KEYS;
    }
    if (2 * (t->count + 1) > t->mask + 1) table_rebuild(t, 2 * (t->mask + 1), 0);
    struct entry *e = malloc(sizeof *e + length);
    if (!e) {
        perror("evhttp-tap: malloc");
        exit(1);
    }
    e->hash = hash;
    e->last = now;
    e->count = 1;
    e->length = length;
    memcpy(e->key, key, length);
    table_place(t, e);
    return e;
}

static void send_problem(struct evhttp_request *req, int status, const char *reason, const char *problem, size_t length,
                         const char *allow) {
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/problem+json");
    if (allow) evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", allow);
    evbuffer_add(body, problem, length);
    evhttp_send_reply(req, status, reason, body);
}

static const char *method_name(enum evhttp_cmd_type command) {
    switch (command) {
    case EVHTTP_REQ_GET: return "GET";
    case EVHTTP_REQ_POST: return "POST";
    case EVHTTP_REQ_HEAD: return "HEAD";
    case EVHTTP_REQ_PUT: return "PUT";
    case EVHTTP_REQ_DELETE: return "DELETE";
    case EVHTTP_REQ_OPTIONS: return "OPTIONS";
    case EVHTTP_REQ_TRACE: return "TRACE";
    case EVHTTP_REQ_CONNECT: return "CONNECT";
    case EVHTTP_REQ_PATCH: return "PATCH";
    }
    return "?";
}

/* 404 "no route for <METHOD> <path>", the path escaped as a JSON string. */
static void send_not_found(struct evhttp_request *req, const char *path) {
    evbuffer_add_printf(body,
        "{\"type\":\"urn:sluice:problem:not-found\",\"title\":\"Not Found\",\"status\":404,"
        "\"detail\":\"no route for %s ", method_name(evhttp_request_get_command(req)));
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        switch (*p) {
        case '"': evbuffer_add(body, "\\\"", 2); break;
        case '\\': evbuffer_add(body, "\\\\", 2); break;
        case '\n': evbuffer_add(body, "\\n", 2); break;
        case '\r': evbuffer_add(body, "\\r", 2); break;
        case '\t': evbuffer_add(body, "\\t", 2); break;
        default:
            if (*p < 0x20) evbuffer_add_printf(body, "\\u%04x", *p);
            else evbuffer_add(body, p, 1);
        }
    }
    evbuffer_add(body, "\"}", 2);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/problem+json");
    evhttp_send_reply(req, 404, "Not Found", body);
}

static int hex_value(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Percent-decodes `rest` into `key` (MAX_KEY_BYTES at most); its length, or -1 when it is not
 * then 1-128 bytes of visible ASCII. */
static long decode_key(const char *rest, char *key) {
    size_t length = 0;
    for (const unsigned char *p = (const unsigned char *)rest; *p; p++) {
        int byte = *p;
        if (byte == '%') {
            int high = hex_value(p[1]), low = high < 0 ? -1 : hex_value(p[2]);
            if (low < 0) return -1;
            byte = high << 4 | low;
            p += 2;
        }
        if (byte < 0x21 || byte > 0x7E || length == MAX_KEY_BYTES) return -1;
        key[length++] = (char)byte;
    }
    return length == 0 ? -1 : (long)length;
}

static void on_request(struct evhttp_request *req, void *ctx) {
    (void)ctx;
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    if (!path) path = "";
    if (strncmp(path, "/tap/", 5) != 0) {
        send_not_found(req, path);
        return;
    }
    if (evhttp_request_get_command(req) != EVHTTP_REQ_POST) {
        send_problem(req, 405, "Method Not Allowed", METHOD_NOT_ALLOWED, sizeof METHOD_NOT_ALLOWED - 1, "POST");
        return;
    }
    char key[MAX_KEY_BYTES];
    long decoded = decode_key(path + 5, key);
    if (decoded < 0) {
        send_problem(req, 400, "Bad Request", BAD_KEY, sizeof BAD_KEY - 1, NULL);
        return;
    }
    size_t length = (size_t)decoded;

    uint64_t now = now_ns();
    uint64_t hash = hash_key(key, length);
    struct entry **slot = table_find(&table, key, length, hash);
    struct entry *e = *slot;
    struct evkeyvalq *headers = evhttp_request_get_output_headers(req);
    if (e && now - e->last < window_ns) {
        uint64_t retry_ns = e->last + window_ns - now;
        unsigned long long retry = (retry_ns + 999999999u) / 1000000000u;
        if (retry < 1) retry = 1;
        char retry_text[24], limit[64];
        snprintf(retry_text, sizeof retry_text, "%llu", retry);
        snprintf(limit, sizeof limit, "\"tap\";r=0;t=%llu", retry);
        evhttp_add_header(headers, "Content-Type", "application/problem+json");
        evhttp_add_header(headers, "Retry-After", retry_text);
        evhttp_add_header(headers, "RateLimit-Policy", policy);
        evhttp_add_header(headers, "RateLimit", limit);
        evbuffer_add(body, THROTTLED, sizeof THROTTLED - 1);
        evhttp_send_reply(req, 429, "Too Many Requests", body);
        return;
    }
    if (e) {
        e->last = now;
        e->count++;
    } else {
        e = table_insert(&table, key, length, hash, now);
    }
    evhttp_add_header(headers, "Content-Type", "application/json");
    evhttp_add_header(headers, "RateLimit-Policy", policy);
    evhttp_add_header(headers, "RateLimit", limit_ok);
    evbuffer_add_printf(body, "{\"tap\":%llu}", (unsigned long long)e->count);
    evhttp_send_reply(req, 200, "OK", body);
}

static void on_signal(evutil_socket_t signal, short what, void *ctx) {
    (void)signal;
    (void)what;
    event_base_loopbreak((struct event_base *)ctx);
}

static void usage(const char *name) {
    fprintf(stderr, "usage: %s [--host ADDRESS] [--port PORT] [--window-ms MILLISECONDS] [--changelist]\n", name);
}

int main(int argc, char **argv) {
    const char *host = "127.0.0.1";
    long port = 8081;
    long window_ms = 1000;
    int changelist = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--port") == 0 && i + 1 < argc) {
            char *end;
            port = strtol(argv[++i], &end, 10);
            if (*end != '\0' || port < 0 || port > 65535) {
                fprintf(stderr, "evhttp-tap: --port must be 0...65535\n");
                return 2;
            }
        } else if (strcmp(argv[i], "--window-ms") == 0 && i + 1 < argc) {
            char *end;
            window_ms = strtol(argv[++i], &end, 10);
            if (*end != '\0' || window_ms < 1) {
                fprintf(stderr, "evhttp-tap: --window-ms must be 1 or more\n");
                return 2;
            }
        } else if (strcmp(argv[i], "--changelist") == 0) {
            changelist = 1;
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
    window_ns = (uint64_t)window_ms * 1000000u;
    window_s = (window_ms + 999) / 1000;
    snprintf(policy, sizeof policy, "\"tap\";q=1;w=%ld", window_s);
    snprintf(limit_ok, sizeof limit_ok, "\"tap\";r=0;t=%ld", window_s);
    table_init(&table, 1u << 16);

    signal(SIGPIPE, SIG_IGN);
    struct event_base *base = NULL;
    struct event_config *config = event_config_new();
    if (config) {
        if (changelist) event_config_set_flag(config, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
        base = event_base_new_with_config(config);
        event_config_free(config);
    }
    struct evhttp *http = base ? evhttp_new(base) : NULL;
    body = evbuffer_new();
    if (!base || !http || !body) {
        fprintf(stderr, "evhttp-tap: cannot create the event base\n");
        return 1;
    }
    evhttp_set_gencb(http, on_request, NULL);
    struct evhttp_bound_socket *bound = evhttp_bind_socket_with_handle(http, host, (ev_uint16_t)port);
    if (!bound) {
        fprintf(stderr, "evhttp-tap: cannot listen on %s:%ld\n", host, port);
        return 1;
    }
    struct sockaddr_storage address;
    socklen_t length = sizeof address;
    if (getsockname(evhttp_bound_socket_get_fd(bound), (struct sockaddr *)&address, &length) == 0) {
        if (address.ss_family == AF_INET6) port = ntohs(((struct sockaddr_in6 *)&address)->sin6_port);
        else port = ntohs(((struct sockaddr_in *)&address)->sin_port);
    }
    struct event *sigint = evsignal_new(base, SIGINT, on_signal, base);
    struct event *sigterm = evsignal_new(base, SIGTERM, on_signal, base);
    event_add(sigint, NULL);
    event_add(sigterm, NULL);
    fprintf(stderr, "evhttp-tap: listening on %s:%ld (window %ld ms%s)\n", host, port, window_ms,
            changelist ? ", epoll changelist" : "");

    event_base_dispatch(base);

    event_free(sigint);
    event_free(sigterm);
    evhttp_free(http);
    evbuffer_free(body);
    event_base_free(base);
    return 0;
}
