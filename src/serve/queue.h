/* The requests that wait for a worker (loop.c): a FIFO bounded in length
   (--queue) and in waiting time (--queue-wait), apart from the accept loop
   so that its order, its bound and its expiry are unit-tested on their own.
   Every function takes the queue's lock; times are CLOCK_MONOTONIC and
   passed in, so that a test chooses them.  */
#ifndef SP_SERVE_QUEUE_H
#define SP_SERVE_QUEUE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

#include "serve/serve.h"

struct sp_serve_pending
{
  struct sp_serve_request r;
  uint64_t queued_ns; /* monotonic, for the waiting limit */
};

struct sp_serve_queue
{
  pthread_mutex_t lock;
  pthread_cond_t ready;
  struct sp_serve_pending *items;
  size_t cap, head, len;
  bool closing;
};

/* cap > 0 entries.  */
int sp_serve_queue_init (struct sp_serve_queue *q, size_t cap, sp_error_t *err);
/* Frees the entries' array, not what they hold: the caller has drained it.  */
void sp_serve_queue_destroy (struct sp_serve_queue *q);

/* Appends p; false, and nothing kept, when the queue is full or closing.  */
bool sp_serve_queue_push (struct sp_serve_queue *q, const struct sp_serve_pending *p);

/* The oldest entry into *out, waiting for one; false once the queue is
   closing and empty (a worker's end).  */
bool sp_serve_queue_pop (struct sp_serve_queue *q, struct sp_serve_pending *out);

/* The oldest entry into *out if it was queued at least limit_ns before now
   (or whatever its age, when all): true.  Otherwise false, and *wait_ms is
   a wait in milliseconds after which the oldest one will have waited
   limit_ns (one more than the whole milliseconds left, so that a poll that
   long finds it expired), or -1 when the queue is empty.  */
bool sp_serve_queue_take_expired (struct sp_serve_queue *q, uint64_t now_ns, uint64_t limit_ns, bool all,
                                  struct sp_serve_pending *out, int *wait_ms);

/* No push succeeds after it, and every pop returns false once the queue
   is empty.  */
void sp_serve_queue_close (struct sp_serve_queue *q);

#endif
