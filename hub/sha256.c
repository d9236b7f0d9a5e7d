/* sha256: see sha256.h. */
#include "hub/sha256.h"

#include <stdlib.h>

#include <openssl/evp.h>

struct hub_sha256 {
	EVP_MD_CTX *md;
};

struct hub_sha256 *hub_sha256_new(void)
{
	struct hub_sha256 *h = calloc(1, sizeof *h);
	if (!h)
		return NULL;
	if (!(h->md = EVP_MD_CTX_new()) || hub_sha256_reset(h)) {
		hub_sha256_free(h);
		return NULL;
	}
	return h;
}

int hub_sha256_reset(struct hub_sha256 *h)
{
	return EVP_DigestInit_ex(h->md, EVP_sha256(), NULL) == 1 ? 0 : -1;
}

int hub_sha256_update(struct hub_sha256 *h, const void *p, size_t n)
{
	return EVP_DigestUpdate(h->md, p, n) == 1 ? 0 : -1;
}

int hub_sha256_final(struct hub_sha256 *h, char hex[65])
{
	static const char digits[] = "0123456789abcdef";
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned n = 0;
	if (EVP_DigestFinal_ex(h->md, d, &n) != 1 || n != 32)
		return -1;
	for (unsigned i = 0; i < 32; i++) {
		hex[2 * i] = digits[d[i] >> 4];
		hex[2 * i + 1] = digits[d[i] & 15];
	}
	hex[64] = 0;
	return 0;
}

void hub_sha256_free(struct hub_sha256 *h)
{
	if (h)
		EVP_MD_CTX_free(h->md);
	free(h);
}
