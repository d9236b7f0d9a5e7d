/* sha256: a thin wrapper over OpenSSL's libcrypto (EVP), in a file of its own
 * because OpenSSL's headers declare an ERR_STATE of their own (common/err.h
 * has the error codes). Each call returns 0 or -1. */
#ifndef UNICORN_HUB_SHA256_H
#define UNICORN_HUB_SHA256_H

#include <stddef.h>

struct hub_sha256;

struct hub_sha256 *hub_sha256_new(void);     /* NULL: out of memory */
int hub_sha256_reset(struct hub_sha256 *h);  /* start over */
int hub_sha256_update(struct hub_sha256 *h, const void *p, size_t n);
/* Lower-case hex digest; h must be reset before further use. */
int hub_sha256_final(struct hub_sha256 *h, char hex[65]);
void hub_sha256_free(struct hub_sha256 *h);

#endif
