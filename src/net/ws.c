/*
 * ws.c - WebSocket framing over memory: wslay's event API with a receive
 * callback that reads the bytes being fed and a send callback that hands
 * frames to the owner. See ws.h.
 */
#include "net/ws.h"

#include <errno.h>
#include <string.h>

#include <openssl/sha.h>
#include <wslay/wslay.h>

#include "base/base64.h"

static ssize_t recv_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *user)
{
    struct ws_conn *ws = user;
    (void)flags;
    if (!ws->in_len) {
        wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
        return -1;
    }
    size_t n = len < ws->in_len ? len : ws->in_len;
    memcpy(buf, ws->in, n);
    ws->in += n;
    ws->in_len -= n;
    return (ssize_t)n;
}

static ssize_t send_cb(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags,
                       void *user)
{
    struct ws_conn *ws = user;
    (void)flags;
    if (ws->failed || ws->ops->write(ws, data, len, ws->ctx) != 0) {
        ws->failed = true;
        wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
        return -1;
    }
    return (ssize_t)len;
}

static int genmask_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, void *user)
{
    struct ws_conn *ws = user;
    (void)ctx;
    while (len > 0) {
        uint64_t v = rng_next_u64(&ws->mask_rng);
        size_t k = len < sizeof(v) ? len : sizeof(v);
        memcpy(buf, &v, k);
        buf += k;
        len -= k;
    }
    return 0;
}

static void on_msg_cb(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg,
                      void *user)
{
    struct ws_conn *ws = user;
    (void)ctx;
    if (arg->opcode == WSLAY_PING)
        ws->pings_in++;
    if (arg->opcode != WSLAY_TEXT_FRAME && arg->opcode != WSLAY_BINARY_FRAME)
        return;
    ws->msgs_in++;
    if (ws->ops->on_message)
        ws->ops->on_message(ws, arg->opcode, arg->msg, arg->msg_length, ws->ctx);
}

int ws_conn_init(struct ws_conn *ws, bool server, size_t max_message, uint64_t mask_seed,
                 const struct ws_conn_ops *ops, void *ctx)
{
    memset(ws, 0, sizeof(*ws));
    if (!ops || !ops->write || !max_message)
        return -EINVAL;
    static const struct wslay_event_callbacks cbs = {
        .recv_callback = recv_cb,
        .send_callback = send_cb,
        .genmask_callback = genmask_cb,
        .on_msg_recv_callback = on_msg_cb,
    };
    wslay_event_context_ptr c = NULL;
    int rc = server ? wslay_event_context_server_init(&c, &cbs, ws)
                    : wslay_event_context_client_init(&c, &cbs, ws);
    if (rc)
        return -ENOMEM;
    wslay_event_config_set_max_recv_msg_length(c, max_message);
    ws->wslay = c;
    ws->ops = ops;
    ws->ctx = ctx;
    ws->server = server;
    rng_seed(&ws->mask_rng, mask_seed);
    return 0;
}

void ws_conn_release(struct ws_conn *ws)
{
    if (ws->wslay)
        wslay_event_context_free(ws->wslay);
    ws->wslay = NULL;
}

/* Writes what wslay has queued. 0, or TS_CLOSED when a write failed. */
static int flush(struct ws_conn *ws)
{
    if (ws->failed)
        return TS_CLOSED;
    int rc = wslay_event_send(ws->wslay);
    if (rc || ws->failed) {
        ws->failed = true;
        return TS_CLOSED;
    }
    return 0;
}

int ws_conn_feed(struct ws_conn *ws, const void *data, size_t len)
{
    if (!ws->wslay)
        return -EINVAL;
    ws->in = data;
    ws->in_len = len;
    int rc = wslay_event_get_read_enabled(ws->wslay) ? wslay_event_recv(ws->wslay) : 0;
    ws->in = NULL;
    ws->in_len = 0;
    if (rc == WSLAY_ERR_NOMEM)
        return -ENOMEM;
    if (rc) /* a callback failure: our write failed */
        ws->failed = true;
    if (ws->failed)
        return -EIO;
    if (flush(ws))
        return -EIO;
    return wslay_event_get_read_enabled(ws->wslay) ? 0 : TS_CLOSED;
}

int ws_conn_send_text(struct ws_conn *ws, const void *data, size_t len)
{
    return ws_conn_send(ws, WS_OP_TEXT, data, len);
}

int ws_conn_send(struct ws_conn *ws, int opcode, const void *data, size_t len)
{
    if (opcode != WS_OP_TEXT && opcode != WS_OP_BINARY)
        return -EINVAL;
    if (!ws->wslay || ws->failed || wslay_event_get_close_sent(ws->wslay))
        return TS_CLOSED;
    struct wslay_event_msg m = {(uint8_t)opcode, data, len};
    int rc = wslay_event_queue_msg(ws->wslay, &m);
    if (rc == WSLAY_ERR_NOMEM)
        return -ENOMEM;
    if (rc)
        return TS_CLOSED;
    ws->msgs_out++;
    return flush(ws);
}

int ws_conn_close(struct ws_conn *ws, uint16_t code, const char *reason)
{
    if (!ws->wslay || wslay_event_get_close_sent(ws->wslay))
        return TS_CLOSED;
    size_t rlen = reason ? strlen(reason) : 0;
    if (rlen > 123)
        rlen = 123;
    int rc = wslay_event_queue_close(ws->wslay, code, (const uint8_t *)reason, rlen);
    if (rc == WSLAY_ERR_NOMEM)
        return -ENOMEM;
    if (rc)
        return -EINVAL;
    return flush(ws);
}

bool ws_conn_close_received(const struct ws_conn *ws)
{
    return ws->wslay && wslay_event_get_close_received(ws->wslay);
}

uint16_t ws_conn_close_code(const struct ws_conn *ws)
{
    return ws_conn_close_received(ws) ? wslay_event_get_status_code_received(ws->wslay) : 0;
}

bool ws_conn_close_sent(const struct ws_conn *ws)
{
    return ws->wslay && wslay_event_get_close_sent(ws->wslay);
}

uint16_t ws_conn_close_code_sent(const struct ws_conn *ws)
{
    return ws_conn_close_sent(ws) ? wslay_event_get_status_code_sent(ws->wslay) : 0;
}

bool ws_conn_failed(const struct ws_conn *ws)
{
    return ws->failed;
}

int ws_accept_key(const char *key, size_t key_len, char out[WS_ACCEPT_LEN + 1])
{
    static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    if (key_len > 256)
        return -EINVAL;
    char tmp[256 + sizeof(guid)];
    memcpy(tmp, key, key_len);
    memcpy(tmp + key_len, guid, sizeof(guid) - 1);
    unsigned char md[SHA_DIGEST_LENGTH];
    SHA1((const unsigned char *)tmp, key_len + sizeof(guid) - 1, md);
    base64_encode(md, sizeof(md), out);
    return 0;
}

void ws_client_key(struct rng *r, char out[WS_KEY_LEN + 1])
{
    uint64_t v[2] = {rng_next_u64(r), rng_next_u64(r)};
    base64_encode(v, sizeof(v), out);
}

bool ws_key_valid(const char *key)
{
    unsigned char raw[24];
    if (!key || strlen(key) != WS_KEY_LEN)
        return false;
    return base64_decode(key, WS_KEY_LEN, raw, 0) == 16;
}
