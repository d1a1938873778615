/* The releaser's answers, held by release time (releaser.c): a min-heap of
   fixed capacity, apart so that its order is unit-tested on its own.  */
#ifndef SP_SERVE_RELEASE_HEAP_H
#define SP_SERVE_RELEASE_HEAP_H

#include <stddef.h>
#include <stdint.h>

struct sp_release_held
{
  uint64_t at_ns; /* CLOCK_MONOTONIC: when its ERROR may leave */
  int fd;
  uint8_t version; /* the protocol version its ERROR is sent in */
};

/* items holds cap entries, owned by the caller.  */
struct sp_release_heap
{
  struct sp_release_held *items;
  size_t len;
  size_t cap;
};

/* Adds item; the caller has checked that len < cap.  */
void sp_release_heap_push (struct sp_release_heap *h, struct sp_release_held item);
/* Removes and returns the entry due first; the caller has checked len > 0.  */
struct sp_release_held sp_release_heap_pop (struct sp_release_heap *h);

#endif
