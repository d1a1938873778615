/* The accept loop: the main thread accepts, reads each request frame without
   blocking (a poll over every connection still sending), validates it, and
   queues only whole, valid requests; --concurrency workers run them.  A
   silent or slow client therefore holds an fd and a few bytes here, never a
   sandbox slot.  Unread connections are bounded in number
   (SP_SERVE_UNREAD_MAX) and in time (SP_SERVE_REQUEST_READ_SECONDS); the
   queue is bounded in length and in waiting time, so that an agent always
   gets an answer: its own, or ERROR.  */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/bounds.h"
#include "base/cleanup.h"
#include "base/clock.h"
#include "base/protocol.h"
#include "base/request.h"

#include "serve/queue.h"
#include "serve/serve.h"

#define SHUTDOWN_KILL_INTERVAL_US (200 * 1000)

/* The loop's queue: the requests, and the proxy they are for.  */
struct queue
{
  struct sp_serve *s;
  struct sp_serve_queue fifo;
};

struct worker
{
  struct queue *q;
  unsigned index; /* its client's (struct sp_serve_client) */
  pthread_t thread;
};

/* The connections whose frames are still arriving.  */
struct unread
{
  struct sp_serve_conn conns[SP_SERVE_UNREAD_MAX];
  size_t len;
};

static void *
worker (void *arg)
{
  struct worker *self = arg;
  struct sp_serve_pending p;

  while (sp_serve_queue_pop (&self->q->fifo, &p))
    sp_serve_invocation (self->q->s, &p.r, sp_realtime_ns (), self->index);
  return NULL;
}

static void
refuse_request (struct sp_serve *s, struct sp_serve_request *r, enum sp_cause cause, const char *reason)
{
  sp_serve_refuse (s, r->fd, sp_serve_frame_version (r->frame, SP_FRAME_HEADER_BYTES), &r->arrival, cause,
                   reason);
  free (r->frame);
  r->frame = NULL;
  sp_answer_schema_free (r->schema);
  r->schema = NULL;
}

/* Refuses, outside the lock, every queued request that waited too long (or
   every one, when all is true).  Returns the milliseconds until the next one
   would expire, or -1 when none waits.  */
static int
expire (struct queue *q, bool all, enum sp_cause cause, const char *reason)
{
  uint64_t limit = (uint64_t)q->s->opt->queue_wait_seconds * 1000000000ULL;
  uint64_t now = sp_monotonic_ns ();
  struct sp_serve_pending p;
  int timeout;

  while (sp_serve_queue_take_expired (&q->fifo, now, limit, all, &p, &timeout))
    refuse_request (q->s, &p.r, cause, reason);
  return timeout;
}

/* The request's answer schema (sp_answer_schema_parse), into r->schema.  */
static int
parse_schema (struct sp_serve_request *r, sp_error_t *err)
{
  if (sp_answer_schema_parse ((const char *)r->req.schema.data, r->req.schema.len, &r->schema, err) < 0)
    return sp_error_wrap (err, "request: answer schema");
  return 0;
}

/* A whole frame: decoded and validated here, so that only a valid request
   waits for a slot.  */
static void
enqueue (struct queue *q, struct sp_serve_conn *c)
{
  struct sp_serve_pending p = { .r = { .fd = c->fd, .frame = c->frame, .arrival = c->arrival } };
  cleanup_error sp_error_t err = NULL;
  int ret;

  c->fd = -1;
  c->frame = NULL;
  if (sp_request_decode (p.r.frame, c->len, &p.r.req, &err) < 0)
    {
      sp_error_wrap (&err, "frame");
      refuse_request (q->s, &p.r, SP_CAUSE_FRAME, sp_error_message (err));
      return;
    }
  ret = sp_request_validate (&p.r.req, q->s->config->private_repos, q->s->config->n_private_repos, &err);
  if (ret < 0)
    {
      sp_error_wrap (&err, "request");
      refuse_request (q->s, &p.r,
                      ret == SP_REQUEST_REPO_UNKNOWN ? SP_CAUSE_UNKNOWN_REPOSITORY : SP_CAUSE_BAD_REQUEST,
                      sp_error_message (err));
      return;
    }
  /* An enclaves document may lower the script's bound (its
     script.maxScriptBytes, docs/config.md).  */
  if (p.r.req.script.len > q->s->config->max_script_bytes)
    {
      sp_make_error (&err, 0, "request: script: %zu bytes, more than the config's %zu", p.r.req.script.len,
                     q->s->config->max_script_bytes);
      refuse_request (q->s, &p.r, SP_CAUSE_BAD_REQUEST, sp_error_message (err));
      return;
    }
  /* A v2 request's schema is parsed and counted here, off the slots, so
     that one over a bound is refused as any invalid request is: before
     anything is debited.  */
  if (p.r.req.version == 2 && parse_schema (&p.r, &err) < 0)
    {
      refuse_request (q->s, &p.r, SP_CAUSE_BAD_REQUEST, sp_error_message (err));
      return;
    }
  p.queued_ns = sp_monotonic_ns ();
  if (!sp_serve_queue_push (&q->fifo, &p))
    refuse_request (q->s, &p.r, SP_CAUSE_QUEUE_FULL, "the queue is full");
}

/* A whole hello (docs/protocol.md, "Handshake"): answered at once with the
   constant reply, from here, so that it reaches no queue, slot, ledger,
   audit line or sandbox.  It carries nothing of the agent's and its reply
   nothing of a repository's, so it needs no release time either.  */
static void
answer_hello (struct sp_serve_conn *c)
{
  uint8_t reply[SP_HELLO_REPLY_FRAME_BYTES];

  sp_hello_reply_encode (reply);
  /* A fresh connection's buffer has room; a client gone loses it.  */
  (void)send (c->fd, reply, sizeof (reply), MSG_NOSIGNAL | MSG_DONTWAIT);
  sp_serve_conn_release (c);
}

/* A whole frame off connection c: a hello is answered, anything else is a
   request for the queue.  A hello's header was checked as one (reader.c),
   and its decode here checks the whole frame again.  */
static void
take_frame (struct queue *q, struct sp_serve_conn *c)
{
  cleanup_error sp_error_t err = NULL;

  if (sp_frame_client_kind (c->frame) != SP_FRAME_KIND_HELLO)
    {
      enqueue (q, c);
      return;
    }
  if (sp_hello_decode (c->frame, c->len, &err) < 0)
    {
      sp_error_wrap (&err, "frame");
      sp_serve_refuse (q->s, c->fd, sp_serve_frame_version (c->frame, c->len), &c->arrival, SP_CAUSE_FRAME,
                       sp_error_message (err));
      c->fd = -1;
      sp_serve_conn_release (c);
      return;
    }
  answer_hello (c);
}

static void
unread_drop (struct unread *u, size_t i)
{
  u->conns[i] = u->conns[--u->len];
}

/* Refuses one unread connection (ERROR, audited) and forgets it.  */
static void
unread_refuse (struct queue *q, struct unread *u, size_t i, enum sp_cause cause, const char *reason)
{
  struct sp_serve_conn *c = &u->conns[i];

  sp_serve_refuse (q->s, c->fd, sp_serve_frame_version (c->hdr, c->got), &c->arrival, cause, reason);
  c->fd = -1;
  sp_serve_conn_release (c);
  unread_drop (u, i);
}

static void
accept_all (struct queue *q, struct unread *u, int listen_fd)
{
  for (;;)
    {
      int fd = accept4 (listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
      uint64_t received = sp_realtime_ns (), accepted = sp_monotonic_ns ();
      struct sp_serve_arrival arrival;

      if (fd < 0)
        return; /* EAGAIN, or a client that left: the loop polls again */
      sp_serve_arrival_init (&arrival, fd, received, accepted);
      if (u->len == SP_SERVE_UNREAD_MAX)
        {
          char reason[96];

          snprintf (reason, sizeof (reason), "%d connections are still sending their requests",
                    SP_SERVE_UNREAD_MAX);
          sp_serve_refuse (q->s, fd, 1, &arrival, SP_CAUSE_TOO_MANY_UNREAD, reason);
          continue;
        }
      sp_serve_conn_init (&u->conns[u->len++], fd, &arrival);
    }
}

/* Reads what each ready connection sent; queues the whole ones, refuses the
   broken ones and those past their deadline.  Returns the milliseconds until
   the next deadline, or -1 when none is pending.  */
static int
read_ready (struct queue *q, struct unread *u, const struct pollfd *fds, size_t nfds)
{
  uint64_t now;
  int timeout = -1;

  /* Backwards: unread_drop moves the last connection into the gap.  fds[i]
     is conns[i] as polled: none was added since.  */
  for (size_t i = nfds; i-- > 0;)
    {
      cleanup_error sp_error_t err = NULL;
      int ret;

      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
        continue;
      ret = sp_serve_conn_read (&u->conns[i], &err);
      if (ret == 1)
        {
          take_frame (q, &u->conns[i]);
          unread_drop (u, i);
        }
      else if (ret < 0)
        {
          sp_error_wrap (&err, "frame");
          unread_refuse (q, u, i, SP_CAUSE_FRAME, sp_error_message (err));
        }
    }
  now = sp_monotonic_ns ();
  for (size_t i = u->len; i-- > 0;)
    {
      struct sp_serve_conn *c = &u->conns[i];

      if (now >= c->deadline_ns)
        {
          char reason[96];

          snprintf (reason, sizeof (reason), "frame: the request did not arrive within %d s",
                    SP_SERVE_REQUEST_READ_SECONDS);
          unread_refuse (q, u, i, SP_CAUSE_FRAME, reason);
        }
      else
        {
          int left = (int)((c->deadline_ns - now) / SP_NS_PER_MS) + 1;

          if (timeout < 0 || left < timeout)
            timeout = left;
        }
    }
  return timeout;
}

static int
min_timeout (int a, int b)
{
  if (a < 0)
    return b;
  if (b < 0)
    return a;
  return a < b ? a : b;
}

int
sp_serve_loop (struct sp_serve *s, int listen_fd, int signal_fd, sp_error_t *err)
{
  struct queue q = { .s = s };
  cleanup_free struct worker *workers = calloc (s->opt->concurrency, sizeof (struct worker));
  cleanup_free struct unread *u = calloc (1, sizeof (*u));
  unsigned started = 0;
  int ret = 0;
  int read_timeout = -1;
  int rekill_timeout = -1;
  uint64_t rekill_at = 0;

  if (workers == NULL || u == NULL)
    return sp_make_error (err, errno, "allocate the workers");
  if (sp_serve_queue_init (&q.fifo, s->opt->queue, err) < 0)
    return -1;
  if (sp_serve_releaser_start (s, err) < 0)
    {
      sp_serve_queue_destroy (&q.fifo);
      sp_serve_releaser_stop (s);
      return -1;
    }
  if (sp_serve_clients_open (s, err) < 0 || sp_serve_pool_start (s, err) < 0)
    {
      sp_serve_queue_destroy (&q.fifo);
      sp_serve_releaser_stop (s);
      sp_serve_clients_close (s);
      return -1;
    }
  for (; started < s->opt->concurrency; started++)
    {
      workers[started] = (struct worker){ .q = &q, .index = started };
      if ((errno = pthread_create (&workers[started].thread, NULL, worker, &workers[started])) != 0)
        {
          ret = sp_make_error (err, errno, "start a worker");
          break;
        }
    }

  while (ret == 0)
    {
      /* The unread connections first, so that fds[i] is conns[i].  */
      struct pollfd fds[SP_SERVE_UNREAD_MAX + 3];
      size_t n = u->len;
      int timeout = min_timeout (
          expire (&q, false, SP_CAUSE_QUEUE_WAIT, "waited longer than --queue-wait for a slot"),
          read_timeout);

      if (rekill_timeout >= 0)
        {
          uint64_t now = sp_monotonic_ns ();
          timeout = min_timeout (timeout, now >= rekill_at ? 0 : (int)((rekill_at - now) / SP_NS_PER_MS) + 1);
        }
      for (size_t i = 0; i < n; i++)
        fds[i] = (struct pollfd){ .fd = u->conns[i].fd, .events = POLLIN };
      fds[n] = (struct pollfd){ .fd = listen_fd, .events = POLLIN };
      fds[n + 1] = (struct pollfd){ .fd = signal_fd, .events = POLLIN };
      fds[n + 2] = (struct pollfd){ .fd = s->client_watch_fd, .events = POLLIN };
      if (poll (fds, n + 3, timeout) < 0 && errno != EINTR)
        {
          ret = sp_make_error (err, errno, "poll");
          break;
        }
      if ((fds[n + 1].revents & POLLIN) && sp_serve_signals_read (signal_fd, "serve") > 0)
        break;
      /* Clients gone before their answers: their probes are killed now, and
         again until their containers are gone.  */
      if ((fds[n + 2].revents & POLLIN) || (rekill_timeout >= 0 && sp_monotonic_ns () >= rekill_at))
        {
          rekill_timeout
              = (fds[n + 2].revents & POLLIN) ? sp_serve_clients_hangups (s) : sp_serve_clients_rekill (s);
          rekill_at = sp_monotonic_ns () + (uint64_t)(rekill_timeout < 0 ? 0 : rekill_timeout) * SP_NS_PER_MS;
        }
      read_timeout = read_ready (&q, u, fds, n);
      if (fds[n].revents & POLLIN)
        {
          accept_all (&q, u, listen_fd);
          read_timeout = min_timeout (read_timeout, SP_SERVE_REQUEST_READ_SECONDS * 1000);
        }
    }

  /* Shutdown: no new launch, running containers killed, waiting and unread
     requests answered ERROR, then every worker finishes its cleanup.  */
  sp_serve_stop (s);
  while (u->len > 0)
    unread_refuse (&q, u, u->len - 1, SP_CAUSE_SHUTDOWN, "the proxy is shutting down");
  expire (&q, true, SP_CAUSE_SHUTDOWN, "the proxy is shutting down");
  sp_serve_queue_close (&q.fifo);
  /* A container registered just before the stop may not exist yet when the
     first kill comes: kill again until no run is left.  */
  while (sp_serve_stop (s) > 0)
    usleep (SHUTDOWN_KILL_INTERVAL_US);
  for (unsigned i = 0; i < started; i++)
    pthread_join (workers[i].thread, NULL);
  /* The sandboxes made ahead go once no worker can take one.  */
  if (sp_serve_pool_stop (s) < 0 && ret == 0)
    ret = sp_make_error (err, 0, "pool: a sandbox made ahead could not be removed");
  expire (&q, true, SP_CAUSE_SHUTDOWN, "the proxy is shutting down");
  sp_serve_releaser_stop (s);
  sp_serve_clients_close (s);
  sp_serve_queue_destroy (&q.fifo);
  return ret;
}
