/* readfile: read a small regular file (config.json, an index) whole, with a
 * size cap, NUL-terminated. */
#ifndef UNICORN_READFILE_H
#define UNICORN_READFILE_H

#include <stddef.h>

/* *text is malloc'd (len bytes + NUL). ERR_NOTFOUND if missing, ERR_IO if not a
 * readable regular file, ERR_RANGE if larger than cap. */
int readfile(const char *path, size_t cap, char **text, size_t *len);

#endif
