/* exe_path: files that live next to our own executable (bin/): the
 * cluster's other programs, the demo model. */
#ifndef UNICORN_EXE_PATH_H
#define UNICORN_EXE_PATH_H

#include <stddef.h>

/* "<directory of /proc/self/exe>/name" into out[cap]; ERR_IO when the
 * executable's path cannot be read, ERR_RANGE when it does not fit. */
int exe_sibling(const char *name, char *out, size_t cap);

#endif
