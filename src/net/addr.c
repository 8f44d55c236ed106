#include "addr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse_port(const char *p, int *port)
{
    if (!*p || strlen(p) > 5)
        return -EINVAL;
    for (const char *c = p; *c; c++)
        if (*c < '0' || *c > '9')
            return -EINVAL;
    long v = strtol(p, NULL, 10);
    if (v > 65535)
        return -EINVAL;
    *port = (int)v;
    return 0;
}

int addr_parse(const char *s, const char *default_host, char host[ADDR_HOST_MAX], int *port,
               char *err, size_t errlen)
{
    const char *colon;
    size_t hlen;
    const char *h = s;
    if (s[0] == '[') {
        const char *end = strchr(s, ']');
        if (!end || end[1] != ':')
            goto bad;
        h = s + 1;
        hlen = (size_t)(end - h);
        colon = end + 1;
    } else {
        colon = strrchr(s, ':');
        if (!colon) {
            h = default_host;
            hlen = strlen(default_host);
            colon = s - 1; /* the whole string is the port */
        } else {
            if (memchr(s, ':', (size_t)(colon - s)))
                goto bad; /* a bare IPv6 address needs brackets */
            hlen = (size_t)(colon - s);
            if (!hlen) {
                h = default_host;
                hlen = strlen(default_host);
            }
        }
    }
    if (hlen == 0 || hlen >= ADDR_HOST_MAX || parse_port(colon + 1, port))
        goto bad;
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    return 0;
bad:
    ts_errf(err, errlen, "bad address '%s': expected HOST:PORT, [IPV6]:PORT or PORT", s);
    return -EINVAL;
}
