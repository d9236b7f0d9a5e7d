#include "gpu_worker/shaders.h"

#include <string.h>

const struct shader_blob *shader_find(const char *name)
{
	for (const struct shader_blob *b = shader_blobs; b->name; b++)
		if (strcmp(b->name, name) == 0)
			return b;
	return NULL;
}
