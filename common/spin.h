/* spin: the bounded busy-wait of the hot path (docs/cluster.md "Idle is idle").
 *
 * A process that just handed work to a peer or to the GPU looks for the
 * answer for a few hundred microseconds before it sleeps: a futex or fence
 * wake-up costs tens of microseconds on a server, as much as the work of a
 * split stage. Never while idle (only right after work) and always bounded,
 * so an idle cluster still sleeps.
 *
 * UNICORN_SPIN_US (0..10000) sets the bound; the default is
 * SPIN_US_DEFAULT on GPUs and 0 on CPU devices (lavapipe), where a spinning
 * thread steals the cores that run the kernels. */
#ifndef UNICORN_SPIN_H
#define UNICORN_SPIN_H

#include <stdbool.h>
#include <stdint.h>

#define SPIN_US_DEFAULT 200
#define SPIN_US_MAX 10000

/* The spin bound in microseconds for a process whose accelerator is (or is
 * not) a CPU device. */
uint32_t spin_us(bool cpu_device);
/* One polite iteration of a spin loop (the CPU's pause hint). */
void spin_pause(void);
/* CLOCK_MONOTONIC in nanoseconds. */
int64_t spin_now_ns(void);

#endif
