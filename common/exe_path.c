/* exe_path: files next to our own executable (see common/exe_path.h). */
#include "common/exe_path.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"

int exe_sibling(const char *name, char *out, size_t cap)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n <= 0)
		return err_set(ERR_IO, "/proc/self/exe: %s", n < 0 ? strerror(errno) : "empty");
	self[n] = 0;
	char *slash = strrchr(self, '/');
	if (slash)
		*slash = 0;
	int k = snprintf(out, cap, "%s/%s", slash ? self : ".", name);
	if (k < 0 || (size_t)k >= cap)
		return err_set(ERR_RANGE, "%s/%s: path too long", self, name);
	return 0;
}
