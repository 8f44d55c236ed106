/*
 * Fuzz incoming WebSocket frames (net/ws on wslay) and the realtime events
 * they carry (llm/realtime): the first byte picks the side (server: frames
 * must be masked; client: must not be) and the feed size; the input is fed
 * whole to one ws_conn and in pieces to another; both must deliver the same
 * messages (compared by hash). The close decision is not compared: wslay
 * checks a close frame's reason as UTF-8 as its bytes come, so for a frame
 * cut off at the end of the input (or a bad one) the code it answers with,
 * and whether it has answered yet, depend on how the bytes were split.
 * Every message is decoded as a server event.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "llm/realtime.h"
#include "llm/wsframes.h"
#include "net/ws.h"

struct digest {
    uint64_t h;
    size_t n;
    struct realtime_decoder dec;
};

/* a --ws-frames spec every message is also decoded with */
static struct wsframes_spec spec;
static bool spec_ready;

static int sink(struct ws_conn *ws, const void *p, size_t n, void *ctx)
{
    (void)ws;
    (void)p;
    (void)n;
    (void)ctx;
    return 0;
}

static void on_message(struct ws_conn *ws, int op, const uint8_t *p, size_t n, void *ctx)
{
    struct digest *d = ctx;
    (void)ws;
    d->n++;
    d->h = (d->h ^ (uint64_t)op) * 1099511628211ull;
    for (size_t i = 0; i < n; i++)
        d->h = (d->h ^ p[i]) * 1099511628211ull;
    struct realtime_event ev;
    if (realtime_decode(&d->dec, (const char *)p, n, &ev) == 0 && ev.kind == REALTIME_EV_DELTA &&
        ev.delta_len && !ev.delta)
        abort();
    bool end;
    if (spec_ready && wsframes_decode(&spec, &d->dec, (const char *)p, n, &ev, &end) == 0 &&
        ev.kind == REALTIME_EV_DELTA && !ev.delta)
        abort();
}

static const struct ws_conn_ops ops = {.on_message = on_message, .write = sink};

static void feed(bool server, const uint8_t *data, size_t size, size_t step, struct digest *d,
                 bool *closed, uint16_t *code)
{
    struct ws_conn ws;
    memset(d, 0, sizeof(*d));
    realtime_decoder_init(&d->dec);
    if (ws_conn_init(&ws, server, 64 * 1024, 1, &ops, d))
        abort();
    int rc = 0;
    for (size_t off = 0; off < size && rc == 0; off += step) {
        size_t k = size - off < step ? size - off : step;
        rc = ws_conn_feed(&ws, data + off, k);
    }
    *closed = ws_conn_close_sent(&ws);
    *code = ws_conn_close_code_sent(&ws);
    ws_conn_release(&ws);
    realtime_decoder_release(&d->dec);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!spec_ready) {
        static const char s[] = "{\"url\":\"ws://h/x\",\"request\":{},\"delta\":\"/delta\","
                                "\"end\":{\"pointer\":\"/type\",\"equals\":\"response.done\"},"
                                "\"usage\":\"/response/usage/output_tokens\",\"error\":\"/error\"}";
        char err[256];
        spec_ready = wsframes_spec_parse(&spec, s, sizeof(s) - 1, "fuzz", err, sizeof(err)) == 0;
        if (!spec_ready)
            abort();
    }
    if (size < 1)
        return 0;
    /* the input as a spec too: it must parse or be refused, never crash or leak */
    struct wsframes_spec other;
    char err[256];
    if (wsframes_spec_parse(&other, (const char *)data, size, "fuzz", err, sizeof(err)) == 0)
        wsframes_spec_release(&other);
    bool server = data[0] & 1;
    size_t step = (size_t)(data[0] >> 1) + 1;
    struct digest whole, parts;
    bool c1, c2;
    uint16_t k1, k2; /* not compared: see above */
    feed(server, data + 1, size - 1, size, &whole, &c1, &k1);
    feed(server, data + 1, size - 1, step, &parts, &c2, &k2);
    if (whole.n != parts.n || whole.h != parts.h)
        abort();
    (void)c1;
    (void)c2;
    return 0;
}
