/* The requests that wait for a worker: a ring of cap entries under its own
   lock (queue.h).  */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>

#include "base/clock.h"

#include "serve/queue.h"

int
sp_serve_queue_init (struct sp_serve_queue *q, size_t cap, sp_error_t *err)
{
  *q = (struct sp_serve_queue){ .cap = cap };
  q->items = calloc (cap, sizeof (*q->items));
  if (q->items == NULL)
    return sp_make_error (err, errno, "allocate the queue");
  pthread_mutex_init (&q->lock, NULL);
  pthread_cond_init (&q->ready, NULL);
  return 0;
}

void
sp_serve_queue_destroy (struct sp_serve_queue *q)
{
  if (q->items == NULL)
    return;
  pthread_cond_destroy (&q->ready);
  pthread_mutex_destroy (&q->lock);
  free (q->items);
  q->items = NULL;
}

/* The oldest entry, out; under the lock, with len > 0.  */
static struct sp_serve_pending
take_head (struct sp_serve_queue *q)
{
  struct sp_serve_pending p = q->items[q->head];

  q->head = (q->head + 1) % q->cap;
  q->len--;
  return p;
}

bool
sp_serve_queue_push (struct sp_serve_queue *q, const struct sp_serve_pending *p)
{
  bool queued = false;

  pthread_mutex_lock (&q->lock);
  if (q->len < q->cap && !q->closing)
    {
      q->items[(q->head + q->len) % q->cap] = *p;
      q->len++;
      queued = true;
      pthread_cond_signal (&q->ready);
    }
  pthread_mutex_unlock (&q->lock);
  return queued;
}

bool
sp_serve_queue_pop (struct sp_serve_queue *q, struct sp_serve_pending *out)
{
  bool got = false;

  pthread_mutex_lock (&q->lock);
  while (q->len == 0 && !q->closing)
    pthread_cond_wait (&q->ready, &q->lock);
  if (q->len > 0)
    {
      *out = take_head (q);
      got = true;
    }
  pthread_mutex_unlock (&q->lock);
  return got;
}

bool
sp_serve_queue_take_expired (struct sp_serve_queue *q, uint64_t now_ns, uint64_t limit_ns, bool all,
                             struct sp_serve_pending *out, int *wait_ms)
{
  bool got = false;

  *wait_ms = -1;
  pthread_mutex_lock (&q->lock);
  if (q->len > 0)
    {
      uint64_t queued = q->items[q->head].queued_ns;
      /* A clock read before the entry was queued counts as no wait.  */
      uint64_t waited = now_ns > queued ? now_ns - queued : 0;

      if (all || waited >= limit_ns)
        {
          *out = take_head (q);
          got = true;
        }
      else
        *wait_ms = (int)((limit_ns - waited) / SP_NS_PER_MS) + 1;
    }
  pthread_mutex_unlock (&q->lock);
  return got;
}

void
sp_serve_queue_close (struct sp_serve_queue *q)
{
  pthread_mutex_lock (&q->lock);
  q->closing = true;
  pthread_cond_broadcast (&q->ready);
  pthread_mutex_unlock (&q->lock);
}
