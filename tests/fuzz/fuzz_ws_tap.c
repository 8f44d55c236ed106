/*
 * Fuzz the WebSocket frame faults: the first byte picks up to three ws_*
 * faults (their counts and shares from the next bytes) and the direction
 * (bit 6: the client's messages, the faults made "both"), the rest is a
 * sequence of messages split at '\n', each read by ws_event_type
 * (jansson on arbitrary bytes) and fed to ws_tap_message in virtual time.
 * Checks: the type is NUL-ended, shorter than WS_EVENT_TYPE_MAX and found in
 * the message when not empty; the times of what is sent never go back, no
 * verdict is before the arrival; at most two copies; nothing passes after a close.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "chaos/fault.h"
#include "chaos/ws_faults.h"

static struct fault *make(const char *spec)
{
    json_t *j = json_loads(spec, 0, NULL);
    struct fault f;
    char err[256];
    if (!j)
        abort();
    int rc = fault_parse_json(j, &f, err, sizeof err);
    json_decref(j);
    if (rc)
        abort(); /* the specs below are all valid */
    struct fault *h = fault_new(&f);
    if (!h)
        abort();
    return h;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    unsigned pick = data[0], n1 = data[1] % 8, n2 = data[2] % 8;
    data += 3;
    size -= 3;
    char specs[6][192];
    snprintf(specs[0], sizeof specs[0],
             "{\"name\":\"a\",\"type\":\"ws_delay\",\"delay\":\"uniform:0ms-%ums\"}", n1 * 10);
    snprintf(specs[1], sizeof specs[1], "{\"name\":\"b\",\"type\":\"ws_drop\",\"rate\":0.%u}", n2);
    snprintf(specs[2], sizeof specs[2],
             "{\"name\":\"c\",\"type\":\"ws_duplicate\",\"after_events\":%u}", n1);
    snprintf(specs[3], sizeof specs[3],
             "{\"name\":\"d\",\"type\":\"ws_truncate\",\"after_events\":%u}", n2);
    snprintf(specs[4], sizeof specs[4],
             "{\"name\":\"e\",\"type\":\"ws_close\",\"after_events\":%u,\"event\":\"%s\"}", n1,
             n2 & 1 ? "*" : "response.done");
    snprintf(specs[5], sizeof specs[5],
             "{\"name\":\"f\",\"type\":\"ws_stall\",\"after_events\":%u,\"delay\":\"%ums\"}", n2,
             n1 * 7);
    if (pick & 64) /* the client's side: the faults act both ways */
        for (unsigned i = 0; i < 6; i++) {
            size_t l = strlen(specs[i]);
            snprintf(specs[i] + l - 1, sizeof specs[i] - (l - 1), ",\"direction\":\"both\"}");
        }
    struct fault *fs[3];
    size_t n = 0;
    for (unsigned i = 0; i < 6 && n < 3; i++)
        if (pick & (1u << i))
            fs[n++] = make(specs[i]);
    struct ws_tap t;
    ws_tap_init(&t, fs, n, pick, pick & 64 ? FAULT_DIR_UPSTREAM : FAULT_DIR_DOWNSTREAM);
    for (size_t i = 0; i < n; i++)
        fault_unref(fs[i]);
    uint64_t now = 0, last = 0;
    bool closed = false;
    const char *p = (const char *)data, *end = p + size;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        char type[WS_EVENT_TYPE_MAX];
        ws_event_type(p, len, type);
        size_t tl = strnlen(type, sizeof type);
        if (tl == sizeof type)
            abort();
        if (tl && !memmem(p, len, "type", 4))
            abort();
        now += len * 1000;
        struct ws_verdict v = ws_tap_message(&t, type, now);
        bool sends = v.copies || v.close; /* a dropped message's time means nothing */
        if (v.copies > 2 || v.at < now || (sends && v.at < last) || (closed && sends))
            abort();
        if (sends)
            last = v.at;
        closed |= v.close;
        p += len + 1;
    }
    ws_tap_release(&t);
    return 0;
}
