#ifndef UNICORN_VK_BW_H
#define UNICORN_VK_BW_H

#include <stdint.h>

#include "gpu_worker/vk.h"

/* The device's copy bandwidth in GB/s (bytes read + bytes written per second,
 * best of 5 timed copies of *bytes, 256 MiB or less where the device is
 * smaller). Uses timestamp queries 0 and 1: call it with no submission of
 * the caller's in flight. */
int vk_copy_bw(struct vk_ctx *vk, uint64_t *bytes, double *gbs);

#endif
