/*
 * addr.h - "HOST:PORT" listen and connect addresses.
 */
#ifndef TS_NET_ADDR_H
#define TS_NET_ADDR_H

#include <stddef.h>

#include "base/err.h"

#define ADDR_HOST_MAX 256

/*
 * Splits "HOST:PORT", "[V6]:PORT", ":PORT" (host = default_host) or "PORT"
 * into host (without brackets) and port 0..65535. Returns 0 or -EINVAL with
 * a message in err.
 */
TS_MUST_CHECK int addr_parse(const char *s, const char *default_host, char host[ADDR_HOST_MAX],
                             int *port, char *err, size_t errlen);

#endif
