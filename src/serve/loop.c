/* The accept loop: the main thread accepts and queues, --concurrency workers
   run invocations.  The queue is bounded in length and in waiting time, so
   that an agent always gets an answer: its own, or ERROR.  */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sealed-probe/cleanup.h>

#include "serve.h"

#define SHUTDOWN_KILL_INTERVAL_US (200 * 1000)

struct pending
{
  int fd;
  uint64_t received_ns; /* realtime, for the audit record */
  uint64_t queued_ns;   /* monotonic, for the waiting limit */
};

struct queue
{
  struct sp_serve *s;
  pthread_mutex_t lock;
  pthread_cond_t ready;
  struct pending *items;
  size_t cap, head, len;
  bool closing;
};

static void *
worker (void *arg)
{
  struct queue *q = arg;

  for (;;)
    {
      struct pending p;

      pthread_mutex_lock (&q->lock);
      while (q->len == 0 && !q->closing)
        pthread_cond_wait (&q->ready, &q->lock);
      if (q->len == 0)
        {
          pthread_mutex_unlock (&q->lock);
          return NULL;
        }
      p = q->items[q->head];
      q->head = (q->head + 1) % q->cap;
      q->len--;
      pthread_mutex_unlock (&q->lock);
      sp_serve_invocation (q->s, p.fd, p.received_ns, sp_realtime_ns ());
    }
}

/* Refuses, outside the lock, every queued request that waited too long (or
   every one, when all is true).  Returns the milliseconds until the next one
   would expire, or -1 when none waits.  */
static int
expire (struct queue *q, bool all, const char *reason)
{
  uint64_t limit = (uint64_t)q->s->opt->queue_wait_seconds * 1000000000ULL;
  uint64_t now = sp_monotonic_ns ();
  int timeout = -1;

  for (;;)
    {
      struct pending p;

      pthread_mutex_lock (&q->lock);
      if (q->len == 0 || (!all && now - q->items[q->head].queued_ns < limit))
        {
          if (q->len > 0)
            timeout = (int)((q->items[q->head].queued_ns + limit - now) / 1000000) + 1;
          pthread_mutex_unlock (&q->lock);
          return timeout;
        }
      p = q->items[q->head];
      q->head = (q->head + 1) % q->cap;
      q->len--;
      pthread_mutex_unlock (&q->lock);
      sp_serve_refuse (q->s, p.fd, p.received_ns, reason);
    }
}

static void
accept_all (struct queue *q, int listen_fd)
{
  for (;;)
    {
      int fd = accept4 (listen_fd, NULL, NULL, SOCK_CLOEXEC);
      struct pending p;
      bool queued = false;

      if (fd < 0)
        return; /* EAGAIN, or a client that left: the loop polls again */
      p = (struct pending){ .fd = fd, .received_ns = sp_realtime_ns (), .queued_ns = sp_monotonic_ns () };
      pthread_mutex_lock (&q->lock);
      if (q->len < q->cap)
        {
          q->items[(q->head + q->len) % q->cap] = p;
          q->len++;
          queued = true;
          pthread_cond_signal (&q->ready);
        }
      pthread_mutex_unlock (&q->lock);
      if (!queued)
        sp_serve_refuse (q->s, fd, p.received_ns, "the queue is full");
    }
}

int
sp_serve_loop (struct sp_serve *s, int listen_fd, int signal_fd, sp_error_t *err)
{
  struct queue q = {
    .s = s,
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .ready = PTHREAD_COND_INITIALIZER,
    .cap = s->opt->queue,
  };
  cleanup_free pthread_t *workers = calloc (s->opt->concurrency, sizeof (pthread_t));
  unsigned started = 0;
  int ret = 0;

  q.items = calloc (q.cap, sizeof (*q.items));
  if (q.items == NULL || workers == NULL)
    {
      free (q.items);
      return sp_make_error (err, errno, "allocate the queue");
    }
  for (; started < s->opt->concurrency; started++)
    if ((errno = pthread_create (&workers[started], NULL, worker, &q)) != 0)
      {
        ret = sp_make_error (err, errno, "start a worker");
        break;
      }

  while (ret == 0)
    {
      struct pollfd fds[2] = { { .fd = listen_fd, .events = POLLIN }, { .fd = signal_fd, .events = POLLIN } };
      int timeout = expire (&q, false, "waited longer than --queue-wait for a slot");

      if (poll (fds, 2, timeout) < 0 && errno != EINTR)
        {
          ret = sp_make_error (err, errno, "poll");
          break;
        }
      if (fds[1].revents & POLLIN)
        break;
      if (fds[0].revents & POLLIN)
        accept_all (&q, listen_fd);
    }

  /* Shutdown: no new launch, running containers killed, waiting requests
     answered ERROR, then every worker finishes its cleanup.  */
  sp_serve_stop (s);
  expire (&q, true, "the proxy is shutting down");
  pthread_mutex_lock (&q.lock);
  q.closing = true;
  pthread_cond_broadcast (&q.ready);
  pthread_mutex_unlock (&q.lock);
  /* A container registered just before the stop may not exist yet when the
     first kill comes: kill again until no run is left.  */
  while (sp_serve_stop (s) > 0)
    usleep (SHUTDOWN_KILL_INTERVAL_US);
  for (unsigned i = 0; i < started; i++)
    pthread_join (workers[i], NULL);
  expire (&q, true, "the proxy is shutting down");
  free (q.items);
  return ret;
}
