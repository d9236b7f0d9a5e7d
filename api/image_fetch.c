/* image_fetch: http(s) image_url parts (image_fetch.h). */
#include "api/image_fetch.h"

#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/err.h"
#include "formats/image.h"

bool image_fetch_remote(const char *url)
{
	return url && (!strncasecmp(url, "http://", 7) || !strncasecmp(url, "https://", 8));
}

int image_fetch_init(void)
{
	return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : err_set(ERR_IO, "image_url: libcurl did not start");
}

struct body {
	uint8_t *p;
	size_t n, cap;
	bool too_big;
};

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
	struct body *b = arg;
	size_t k = size * nmemb;
	if (k > IMAGE_MAX_BYTES - b->n) {
		b->too_big = true;
		return 0; /* curl stops with CURLE_WRITE_ERROR */
	}
	if (b->n + k > b->cap) {
		size_t cap = b->cap ? b->cap : 65536;
		while (cap < b->n + k)
			cap *= 2;
		if (cap > IMAGE_MAX_BYTES)
			cap = IMAGE_MAX_BYTES;
		uint8_t *p = realloc(b->p, cap);
		if (!p)
			return 0;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, data, k);
	b->n += k;
	return k;
}

int image_fetch(const char *url, uint8_t **bytes, size_t *n)
{
	*bytes = NULL;
	*n = 0;
	if (!image_fetch_remote(url))
		return err_set(ERR_INVAL, "image_url: not an http(s) URL");
	CURL *c = curl_easy_init();
	if (!c)
		return err_set(ERR_NOMEM, "image_url: libcurl: out of memory");
	struct body b = { 0 };
	char why[CURL_ERROR_SIZE] = "";
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "unicorn/1 (libcurl)");
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(c, CURLOPT_MAXREDIRS, (long)IMAGE_FETCH_REDIRS);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, (long)IMAGE_FETCH_TIMEOUT_S);
	curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)IMAGE_MAX_BYTES);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, why);
	CURLcode r = curl_easy_perform(c);
	long status = 0;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(c);
	int rc = 0;
	if (b.too_big || r == CURLE_FILESIZE_EXCEEDED)
		rc = err_set(ERR_INVAL, "image_url: larger than %u bytes", IMAGE_MAX_BYTES);
	else if (r == CURLE_WRITE_ERROR)
		rc = err_set(ERR_NOMEM, "image_url: out of memory");
	else if (r != CURLE_OK)
		rc = err_set(ERR_INVAL, "image_url: not fetched: %s", why[0] ? why : curl_easy_strerror(r));
	else if (status != 200)
		rc = err_set(ERR_INVAL, "image_url: HTTP status %ld", status);
	else if (b.n == 0)
		rc = err_set(ERR_INVAL, "image_url: an empty answer");
	if (rc) {
		free(b.p);
		return rc;
	}
	*bytes = b.p;
	*n = b.n;
	return 0;
}
