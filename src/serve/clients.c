/* The clients of the invocations in flight, watched for their going away
   (docs/operations.md, "Cancellation"): each worker registers its client's
   connection in one epoll set, which the accept loop polls beside the
   socket.  A client whose connection closes before its answer cancels its
   invocation: its probe is killed at once (and again, until its container
   is gone), and the worker removes the sandbox and audits it `cancelled`.

   Only a full close is a cancellation: the client half-closes its side
   once its request is sent (docs/protocol.md), and that is EPOLLRDHUP,
   which is not asked for; a closed connection is EPOLLHUP, which epoll
   always reports.  EPOLLONESHOT: one report per client.  */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "os/log.h"
#include "serve/serve.h"

/* A client is named in the epoll set by its worker and its generation, so
   that a report about a connection that has since ended is never taken for
   the next one's.  */
static uint64_t
client_key (unsigned worker, uint32_t generation)
{
  return ((uint64_t)worker << 32) | generation;
}

int
sp_serve_clients_open (struct sp_serve *s, sp_error_t *err)
{
  s->client_watch_fd = -1;
  s->clients = calloc (s->opt->concurrency, sizeof (*s->clients));
  if (s->clients == NULL)
    return sp_make_error (err, errno, "allocate the clients");
  for (unsigned i = 0; i < s->opt->concurrency; i++)
    s->clients[i].slot = -1;
  s->client_watch_fd = epoll_create1 (EPOLL_CLOEXEC);
  if (s->client_watch_fd < 0)
    return sp_make_error (err, errno, "epoll_create1");
  return 0;
}

void
sp_serve_clients_close (struct sp_serve *s)
{
  if (s->client_watch_fd >= 0)
    close (s->client_watch_fd);
  s->client_watch_fd = -1;
  free (s->clients);
  s->clients = NULL;
}

void
sp_serve_client_watch (struct sp_serve *s, unsigned worker, int fd)
{
  struct sp_serve_client *c = &s->clients[worker];
  struct epoll_event ev = { .events = EPOLLONESHOT };

  pthread_mutex_lock (&s->lock);
  c->generation++;
  c->in_use = true;
  c->cancelled = false;
  c->slot = -1;
  ev.data.u64 = client_key (worker, c->generation);
  pthread_mutex_unlock (&s->lock);
  /* Without the watch, a hangup is still seen at each step the worker
     checks (sp_serve_client_gone): only the kill of a running probe waits.  */
  if (epoll_ctl (s->client_watch_fd, EPOLL_CTL_ADD, fd, &ev) < 0)
    sp_log (SP_LOG_WARNING, "sealed-probe-proxy: serve: watch a client's connection: %s", strerror (errno));
}

void
sp_serve_client_unwatch (struct sp_serve *s, unsigned worker, int fd)
{
  struct sp_serve_client *c = &s->clients[worker];

  pthread_mutex_lock (&s->lock);
  c->generation++;
  c->in_use = false;
  c->slot = -1;
  pthread_mutex_unlock (&s->lock);
  /* Before the fd is closed, so that its number, reused, is never watched
     under the old key.  */
  (void)epoll_ctl (s->client_watch_fd, EPOLL_CTL_DEL, fd, NULL);
}

bool
sp_serve_client_gone (struct sp_serve *s, unsigned worker, int fd)
{
  struct pollfd p = { .fd = fd, .events = 0 };
  bool gone;

  pthread_mutex_lock (&s->lock);
  gone = s->clients[worker].cancelled;
  pthread_mutex_unlock (&s->lock);
  if (!gone && poll (&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR)))
    {
      pthread_mutex_lock (&s->lock);
      s->clients[worker].cancelled = true;
      pthread_mutex_unlock (&s->lock);
      gone = true;
    }
  return gone;
}

bool
sp_serve_client_activate (struct sp_serve *s, unsigned worker, struct sp_serve_sandbox *sb)
{
  bool ok;

  pthread_mutex_lock (&s->lock);
  ok = !s->stopping && !s->clients[worker].cancelled;
  if (ok)
    {
      s->active[sb->slot] = sb->container_id;
      s->clients[worker].slot = (int)sb->slot;
    }
  pthread_mutex_unlock (&s->lock);
  return ok;
}

/* Kills what still runs for a cancelled client: one copy of each container
   id, taken under the lock and killed outside it (ids are never reused, so
   a kill that comes late finds nothing).  Returns how many were killed.  */
static unsigned
kill_cancelled (struct sp_serve *s)
{
  char *ids[SP_SERVE_CONCURRENCY_MAX];
  unsigned n = 0;

  pthread_mutex_lock (&s->lock);
  for (unsigned w = 0; w < s->opt->concurrency && n < SP_SERVE_CONCURRENCY_MAX; w++)
    {
      const struct sp_serve_client *c = &s->clients[w];

      if (c->in_use && c->cancelled && c->slot >= 0 && s->active[c->slot] != NULL
          && (ids[n] = strdup (s->active[c->slot])) != NULL)
        n++;
    }
  pthread_mutex_unlock (&s->lock);
  for (unsigned i = 0; i < n; i++)
    {
      sp_error_t err = NULL;

      if (s->runtime->ops->kill (s->runtime, ids[i], &err) < 0)
        sp_error_release (&err);
      free (ids[i]);
    }
  return n;
}

int
sp_serve_clients_hangups (struct sp_serve *s)
{
  struct epoll_event events[SP_SERVE_CONCURRENCY_MAX];
  int n = epoll_wait (s->client_watch_fd, events, SP_SERVE_CONCURRENCY_MAX, 0);

  pthread_mutex_lock (&s->lock);
  for (int i = 0; i < n; i++)
    {
      unsigned worker = (unsigned)(events[i].data.u64 >> 32);
      uint32_t generation = (uint32_t)events[i].data.u64;

      if (worker < s->opt->concurrency && s->clients[worker].in_use
          && s->clients[worker].generation == generation)
        s->clients[worker].cancelled = true;
    }
  pthread_mutex_unlock (&s->lock);
  return kill_cancelled (s) > 0 ? SP_SERVE_CANCEL_REKILL_MS : -1;
}

int
sp_serve_clients_rekill (struct sp_serve *s)
{
  return kill_cancelled (s) > 0 ? SP_SERVE_CANCEL_REKILL_MS : -1;
}
