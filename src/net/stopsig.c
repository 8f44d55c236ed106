/*
 * stopsig.c - see stopsig.h.
 */
#include "net/stopsig.h"

#include <signal.h>
#include <string.h>

static void on_signal(uv_signal_t *h, int signum)
{
    struct stopsig *s = h->data;
    if (s->signum)
        return;
    s->signum = signum;
    s->on_stop(s, signum);
}

int stopsig_start(struct stopsig *s, uv_loop_t *loop,
                  void (*on_stop)(struct stopsig *s, int signum), void *data)
{
    memset(s, 0, sizeof(*s));
    s->on_stop = on_stop;
    s->data = data;
    int rc = uv_signal_init(loop, &s->sigint);
    if (rc)
        return rc;
    s->inited = 1;
    rc = uv_signal_init(loop, &s->sigterm);
    if (rc)
        return rc;
    s->inited = 2;
    s->sigint.data = s->sigterm.data = s;
    rc = uv_signal_start(&s->sigint, on_signal, SIGINT);
    return rc ? rc : uv_signal_start(&s->sigterm, on_signal, SIGTERM);
}

void stopsig_close(struct stopsig *s)
{
    if (s->inited > 0)
        uv_close((uv_handle_t *)&s->sigint, NULL);
    if (s->inited > 1)
        uv_close((uv_handle_t *)&s->sigterm, NULL);
    s->inited = 0;
}
