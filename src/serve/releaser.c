/* Holding answers until the release mode lets them go (base/release_ladder.h;
   docs/threat-model.md, "Timing").  A worker holds its answer, and so its
   slot, until the release: a request queued behind it then waits for a sum
   of released durations, which tells nothing new.  Answers refused off the
   slots (a bad frame, a full queue) go to one releaser thread, which holds
   them in a small heap by release time.  A stopping proxy lets everything
   go at once.  Each held answer is a refusal, counted for STATUS= when it
   goes (report.c), not before.  */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/protocol.h"

#include "serve/release_heap.h"
#include "serve/serve.h"

struct sp_serve_releaser
{
  struct sp_serve *s;
  pthread_mutex_t lock;
  pthread_cond_t changed;      /* CLOCK_MONOTONIC */
  struct sp_release_heap heap; /* by release time */
  bool stopping;
  bool started;
  pthread_t thread;
};

void
sp_serve_release_plan (const struct sp_serve *s, uint64_t accepted_mono_ns, struct sp_serve_release *r)
{
  uint64_t now = sp_monotonic_ns ();
  uint64_t elapsed_ms = now > accepted_mono_ns ? (now - accepted_mono_ns) / SP_NS_PER_MS : 0;

  r->mode = s->opt->release;
  r->overflow = !sp_release_at (r->mode, s->config->timeout_seconds, elapsed_ms, &r->release_ms);
  r->at_ns = r->overflow || r->mode == SP_RELEASE_IMMEDIATE ? now
                                                            : accepted_mono_ns + r->release_ms * SP_NS_PER_MS;
}

static struct timespec
abs_time (uint64_t ns)
{
  return (struct timespec){ .tv_sec = (time_t)(ns / 1000000000ULL), .tv_nsec = (long)(ns % 1000000000ULL) };
}

void
sp_serve_release_wait (struct sp_serve *s, const struct sp_serve_release *r)
{
  pthread_mutex_lock (&s->lock);
  while (!s->stopping && sp_monotonic_ns () < r->at_ns)
    {
      struct timespec until = abs_time (r->at_ns);
      (void)pthread_cond_timedwait (&s->release_cv, &s->lock, &until);
    }
  pthread_mutex_unlock (&s->lock);
}

static void
send_error (int fd, uint8_t version)
{
  sp_serve_answer (fd, version, SP_RESPONSE_ERROR, NULL, 0);
  close (fd);
}

static void *
releaser_main (void *arg)
{
  struct sp_serve_releaser *q = arg;

  pthread_mutex_lock (&q->lock);
  for (;;)
    {
      if (q->heap.len > 0 && (q->stopping || q->heap.items[0].at_ns <= sp_monotonic_ns ()))
        {
          struct sp_release_held h = sp_release_heap_pop (&q->heap);

          pthread_mutex_unlock (&q->lock);
          send_error (h.fd, h.version);
          sp_serve_report_result (q->s, SP_AUDIT_STATUS_REFUSED);
          pthread_mutex_lock (&q->lock);
          continue;
        }
      if (q->stopping)
        break;
      if (q->heap.len == 0)
        pthread_cond_wait (&q->changed, &q->lock);
      else
        {
          struct timespec until = abs_time (q->heap.items[0].at_ns);
          (void)pthread_cond_timedwait (&q->changed, &q->lock, &until);
        }
    }
  pthread_mutex_unlock (&q->lock);
  return NULL;
}

static int
monotonic_cond (pthread_cond_t *cond)
{
  pthread_condattr_t attr;
  int e;

  if ((e = pthread_condattr_init (&attr)) != 0)
    return e;
  e = pthread_condattr_setclock (&attr, CLOCK_MONOTONIC);
  if (e == 0)
    e = pthread_cond_init (cond, &attr);
  pthread_condattr_destroy (&attr);
  return e;
}

int
sp_serve_releaser_start (struct sp_serve *s, sp_error_t *err)
{
  struct sp_serve_releaser *q = calloc (1, sizeof (*q));
  int e;

  if (q == NULL || (q->heap.items = calloc (SP_SERVE_RELEASE_HELD_MAX, sizeof (*q->heap.items))) == NULL)
    {
      free (q);
      return sp_make_error (err, ENOMEM, "allocate the releaser");
    }
  q->heap.cap = SP_SERVE_RELEASE_HELD_MAX;
  q->s = s;
  pthread_mutex_init (&q->lock, NULL);
  if ((e = monotonic_cond (&q->changed)) != 0 || (e = monotonic_cond (&s->release_cv)) != 0)
    {
      free (q->heap.items);
      free (q);
      return sp_make_error (err, e, "the releaser's condition variables");
    }
  s->release_cv_ready = true;
  s->releaser = q;
  if ((e = pthread_create (&q->thread, NULL, releaser_main, q)) != 0)
    return sp_make_error (err, e, "start the releaser");
  q->started = true;
  return 0;
}

bool
sp_serve_release_later (struct sp_serve *s, int fd, uint8_t version, const struct sp_serve_release *r)
{
  struct sp_serve_releaser *q = s->releaser;
  bool held = false;

  if (q == NULL)
    return false;
  pthread_mutex_lock (&q->lock);
  if (!q->stopping && q->heap.len < q->heap.cap)
    {
      sp_release_heap_push (&q->heap,
                            (struct sp_release_held){ .at_ns = r->at_ns, .fd = fd, .version = version });
      pthread_cond_signal (&q->changed);
      held = true;
    }
  pthread_mutex_unlock (&q->lock);
  return held;
}

bool
sp_serve_release_room (struct sp_serve *s)
{
  struct sp_serve_releaser *q = s->releaser;
  bool room;

  if (q == NULL)
    return false;
  pthread_mutex_lock (&q->lock);
  room = !q->stopping && q->heap.len < q->heap.cap;
  pthread_mutex_unlock (&q->lock);
  return room;
}

void
sp_serve_releaser_stop (struct sp_serve *s)
{
  struct sp_serve_releaser *q = s->releaser;

  /* Held answers go at once: the workers' and the releaser's.  */
  pthread_mutex_lock (&s->lock);
  if (s->release_cv_ready)
    pthread_cond_broadcast (&s->release_cv);
  pthread_mutex_unlock (&s->lock);
  if (q == NULL)
    return;
  pthread_mutex_lock (&q->lock);
  q->stopping = true;
  pthread_cond_signal (&q->changed);
  pthread_mutex_unlock (&q->lock);
  if (q->started)
    pthread_join (q->thread, NULL);
  while (q->heap.len > 0)
    {
      struct sp_release_held h = sp_release_heap_pop (&q->heap);

      send_error (h.fd, h.version);
      sp_serve_report_result (s, SP_AUDIT_STATUS_REFUSED);
    }
  pthread_cond_destroy (&q->changed);
  pthread_mutex_destroy (&q->lock);
  free (q->heap.items);
  free (q);
  s->releaser = NULL;
}
