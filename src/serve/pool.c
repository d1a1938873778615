/* Sandboxes created ahead of their request (docs/operations.md, "Sandboxes
   created ahead"): one thread keeps up to --pool sandboxes per repository
   created but not started, within s->pool_slots in all, so that a request
   finds its runtime's `create` (namespaces, mounts, cgroups) done.  The
   rules it keeps:
   - a sandbox is made for one repository and only sp_serve_pool_take for
     that repository hands it out, once: the taker destroys it after its
     one invocation;
   - it holds nothing from any request (sandbox.c puts the script in at
     run time);
   - the thread never runs on a request's path: a taker only signals it,
     once its script is in the sandbox it took (sp_serve_pool_refill), so
     that no more than --pool sandboxes ever wait without a request;
   - on stop it ends and every waiting sandbox is removed; one left by a
     proxy killed -9 is an orphan of its run, which the next start removes
     with the rest (the runtime's cleanup_orphans, the work directory);
   - a repository whose seed is gone (sp_serve_seed_check) is given up for
     good: its waiting sandboxes are removed and none is made for it again
     (only a restart, once it is staged again, can serve it);
   - what it says on stderr names the repository, never a number.
   Everything below is under s->lock.  */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "os/log.h"
#include "base/bounds.h"
#include "base/cleanup.h"
#include "base/quote.h"

#include "serve/serve.h"

/* After a failed create, the thread waits this long before it tries that
   repository again, doubling up to the maximum: a broken runtime is not
   retried in a loop, and the requests that come meanwhile start cold (and
   answer ERROR with the reason, as they would without the pool).  */
#define POOL_RETRY_FIRST_MS 250
#define POOL_RETRY_MAX_MS   (30 * 1000)

/* A pool sandbox's name is "p" and POOL_NAME_DIGITS digits: all of one
   length, so that no name is a prefix of another.  runsc finds a container
   by a prefix of its id, and refused the delete of `sp-<run>-p1` while
   `sp-<run>-p11` lived ("ambiguous"), failing a probe that had answered.  */
#define POOL_NAME_DIGITS 6
#define POOL_NAMES_MAX   1000000ULL

struct sp_serve_pool
{
  pthread_t thread;
  bool thread_started;
  bool stop;
  pthread_cond_t cv;
  unsigned per_repo;
  unsigned held;                    /* waiting plus being made: at most s->pool_slots */
  unsigned *making;                 /* per repository */
  unsigned *ready_len;              /* per repository */
  struct sp_serve_sandbox ***ready; /* per repository: per_repo entries, oldest first */
  uint64_t *retry_at_ns;            /* per repository: monotonic, 0 when not backing off */
  unsigned *retry_ms;
  bool *gone; /* per repository: its seed is gone, nothing more is made for it */
  uint64_t next_name;
};

/* The repository to make a sandbox for next: the one with the fewest
   (waiting plus being made) among those below per_repo and not backing
   off, the first in config order on a tie.  SIZE_MAX: none now; *wait_ns,
   when some only back off, is how long until the first may try again.
   None once the proxy is stopping: no slot is given out then, and a make
   that failed for it is not backed off, so trying would spin until
   sp_serve_pool_stop wakes the thread to end.  */
static size_t
next_repo (const struct sp_serve *s, const struct sp_serve_pool *p, uint64_t now, uint64_t *wait_ns)
{
  size_t best = SIZE_MAX;
  unsigned best_have = 0;

  *wait_ns = 0;
  /* Past the last name of one width the pool makes no more: requests are
     served cold, never under a name another one's is a prefix of.  */
  if (p->held >= s->pool_slots || s->stopping || p->next_name >= POOL_NAMES_MAX)
    return SIZE_MAX;
  for (size_t i = 0; i < s->config->n_private_repos; i++)
    {
      unsigned have = p->ready_len[i] + p->making[i];

      /* A sealed repository's seed is never copied.  */
      if (have >= p->per_repo || p->gone[i] || sp_serve_repo_sealed (s, i))
        continue;
      if (p->retry_at_ns[i] > now)
        {
          if (*wait_ns == 0 || p->retry_at_ns[i] - now < *wait_ns)
            *wait_ns = p->retry_at_ns[i] - now;
          continue;
        }
      if (best == SIZE_MAX || have < best_have)
        {
          best = i;
          best_have = have;
        }
    }
  return best;
}

static void
wait_for (struct sp_serve *s, struct sp_serve_pool *p, uint64_t wait_ns)
{
  struct timespec until;

  if (wait_ns == 0)
    {
      pthread_cond_wait (&p->cv, &s->lock);
      return;
    }
  clock_gettime (CLOCK_MONOTONIC, &until);
  until.tv_sec += (time_t)(wait_ns / 1000000000ULL);
  until.tv_nsec += (long)(wait_ns % 1000000000ULL);
  if (until.tv_nsec >= 1000000000L)
    {
      until.tv_sec++;
      until.tv_nsec -= 1000000000L;
    }
  pthread_cond_timedwait (&p->cv, &s->lock, &until);
}

/* How many wait for repository i, told to the report (report.c), whose
   lock comes after s->lock.  */
static void
tell (struct sp_serve *s, const struct sp_serve_pool *p, size_t i)
{
  sp_serve_report_waiting (s, i, p->ready_len[i]);
}

/* Removes sb, unlocked, saying so on stderr when something stays.  */
static void
remove_unlocked (struct sp_serve *s, struct sp_serve_sandbox *sb)
{
  cleanup_error sp_error_t err = NULL;
  char q[SP_QUOTE_BUF_SIZE];
  const char *repo = sp_quote_name (s->config->private_repos[sb->seed_index], q);
  char name[24];

  snprintf (name, sizeof (name), "%s", sb->name);
  pthread_mutex_unlock (&s->lock);
  if (sp_serve_sandbox_destroy (s, sb, &err) < 0)
    sp_log (SP_LOG_WARNING, "sealed-probe-proxy: serve: pool: remove sandbox %s of `%s`: %s", name, repo,
            sp_error_message (err));
  pthread_mutex_lock (&s->lock);
}

/* Repository i's seed is gone: said once, its waiting sandboxes (made from
   it) removed, and none made again.  */
static void
give_up (struct sp_serve *s, struct sp_serve_pool *p, size_t i, const sp_error_t why)
{
  p->gone[i] = true;
  sp_log (SP_LOG_ERR, "sealed-probe-proxy: serve: pool: %s; no sandbox is made ahead for it any more",
          sp_error_message (why));
  while (p->ready_len[i] > 0)
    {
      struct sp_serve_sandbox *sb = p->ready[i][--p->ready_len[i]];

      p->held--;
      tell (s, p, i);
      remove_unlocked (s, sb);
    }
}

/* Makes one sandbox for repository i, unlocked; back under the lock, it
   joins the pool, or is removed when the proxy stopped meanwhile.  */
static void
make_one (struct sp_serve *s, struct sp_serve_pool *p, size_t i)
{
  cleanup_error sp_error_t err = NULL;
  struct sp_serve_sandbox *sb = NULL;
  char q[SP_QUOTE_BUF_SIZE];
  char name[24];
  bool ran;
  int slot;

  p->making[i]++;
  p->held++;
  snprintf (name, sizeof (name), "p%0*" PRIu64, POOL_NAME_DIGITS, p->next_name++);
  pthread_mutex_unlock (&s->lock);

  slot = sp_serve_slot_claim (s);
  if (slot < 0)
    sp_make_error (&err, 0, "no free slot");
  else if (sp_serve_sandbox_make (s, i, (unsigned)slot, name, true, &sb, &ran, NULL, &err) < 0)
    sp_serve_slot_free (s, (unsigned)slot);
  else if (s->opt->snapshot == SP_SNAPSHOT_OVERLAY)
    sp_serve_sandbox_warm (sb, SP_SERVE_POOL_WARM_ENTRIES);

  pthread_mutex_lock (&s->lock);
  p->making[i]--;
  if (sb == NULL)
    {
      p->held--;
      if (!p->stop && !s->stopping && sp_error_cause (err) == SP_CAUSE_SEED_GONE)
        give_up (s, p, i, err);
      else if (!p->stop && !s->stopping)
        {
          p->retry_ms[i] = p->retry_ms[i] == 0                       ? POOL_RETRY_FIRST_MS
                           : p->retry_ms[i] >= POOL_RETRY_MAX_MS / 2 ? POOL_RETRY_MAX_MS
                                                                     : p->retry_ms[i] * 2;
          p->retry_at_ns[i] = sp_monotonic_ns () + (uint64_t)p->retry_ms[i] * 1000000ULL;
          /* Said once per failure, with the sandbox's and the
             repository's names: the same failure reaches the audit log
             through the cold start.  */
          sp_log (SP_LOG_WARNING,
                  "sealed-probe-proxy: serve: pool: sandbox %s for `%s`: %s; retrying in %u ms", name,
                  sp_quote_name (s->config->private_repos[i], q), sp_error_message (err), p->retry_ms[i]);
        }
      return;
    }
  p->retry_ms[i] = 0;
  p->retry_at_ns[i] = 0;
  if (p->stop)
    {
      p->held--;
      remove_unlocked (s, sb);
      return;
    }
  p->ready[i][p->ready_len[i]++] = sb;
  tell (s, p, i);
}

static void *
pool_thread (void *arg)
{
  struct sp_serve *s = arg;
  struct sp_serve_pool *p = s->pool;

  pthread_mutex_lock (&s->lock);
  while (!p->stop)
    {
      uint64_t wait_ns;
      size_t i = next_repo (s, p, sp_monotonic_ns (), &wait_ns);

      if (i == SIZE_MAX)
        wait_for (s, p, wait_ns);
      else
        make_one (s, p, i);
    }
  pthread_mutex_unlock (&s->lock);
  return NULL;
}

static void
pool_free (struct sp_serve_pool *p, size_t n_repos)
{
  if (p == NULL)
    return;
  if (p->ready != NULL)
    for (size_t i = 0; i < n_repos; i++)
      free (p->ready[i]);
  free (p->ready);
  free (p->ready_len);
  free (p->making);
  free (p->retry_at_ns);
  free (p->retry_ms);
  free (p->gone);
  free (p);
}

int
sp_serve_pool_start (struct sp_serve *s, sp_error_t *err)
{
  size_t n = s->config->n_private_repos;
  struct sp_serve_pool *p;
  pthread_condattr_t attr;

  if (s->pool_slots == 0)
    return 0;
  p = calloc (1, sizeof (*p));
  if (p == NULL)
    return sp_make_error (err, errno, "pool: allocate");
  p->per_repo = s->opt->pool;
  p->ready = calloc (n, sizeof (*p->ready));
  p->ready_len = calloc (n, sizeof (*p->ready_len));
  p->making = calloc (n, sizeof (*p->making));
  p->retry_at_ns = calloc (n, sizeof (*p->retry_at_ns));
  p->retry_ms = calloc (n, sizeof (*p->retry_ms));
  p->gone = calloc (n, sizeof (*p->gone));
  if (p->ready == NULL || p->ready_len == NULL || p->making == NULL || p->retry_at_ns == NULL
      || p->retry_ms == NULL || p->gone == NULL)
    {
      pool_free (p, n);
      return sp_make_error (err, errno, "pool: allocate");
    }
  for (size_t i = 0; i < n; i++)
    if ((p->ready[i] = calloc (p->per_repo, sizeof (**p->ready))) == NULL)
      {
        pool_free (p, n);
        return sp_make_error (err, errno, "pool: allocate");
      }
  /* Timed waits (a backing-off repository) on the monotonic clock.  */
  pthread_condattr_init (&attr);
  pthread_condattr_setclock (&attr, CLOCK_MONOTONIC);
  pthread_cond_init (&p->cv, &attr);
  pthread_condattr_destroy (&attr);
  s->pool = p;
  if ((errno = pthread_create (&p->thread, NULL, pool_thread, s)) != 0)
    {
      int e = errno;

      s->pool = NULL;
      pthread_cond_destroy (&p->cv);
      pool_free (p, n);
      return sp_make_error (err, e, "pool: start its thread");
    }
  p->thread_started = true;
  return 0;
}

struct sp_serve_sandbox *
sp_serve_pool_take (struct sp_serve *s, size_t seed_index)
{
  struct sp_serve_pool *p = s->pool;
  struct sp_serve_sandbox *sb = NULL;

  if (p == NULL)
    return NULL;
  pthread_mutex_lock (&s->lock);
  if (!p->stop && !s->stopping && p->ready_len[seed_index] > 0)
    {
      /* The oldest first, out of the pool for good.  */
      sb = p->ready[seed_index][0];
      memmove (&p->ready[seed_index][0], &p->ready[seed_index][1],
               (p->ready_len[seed_index] - 1) * sizeof (*p->ready[seed_index]));
      p->ready_len[seed_index]--;
      p->held--;
      sb->refill_owed = true;
      tell (s, p, seed_index);
    }
  pthread_mutex_unlock (&s->lock);
  return sb;
}

void
sp_serve_pool_refill (struct sp_serve *s)
{
  /* The replacement is made by the thread, never here.  */
  pthread_mutex_lock (&s->lock);
  if (s->pool != NULL)
    pthread_cond_signal (&s->pool->cv);
  pthread_mutex_unlock (&s->lock);
}

int
sp_serve_pool_stop (struct sp_serve *s)
{
  struct sp_serve_pool *p = s->pool;
  size_t n = s->config->n_private_repos;
  int ret = 0;

  if (p == NULL)
    return 0;
  pthread_mutex_lock (&s->lock);
  p->stop = true;
  pthread_cond_broadcast (&p->cv);
  pthread_mutex_unlock (&s->lock);
  if (p->thread_started)
    pthread_join (p->thread, NULL);
  for (size_t i = 0; i < n; i++)
    for (unsigned k = 0; k < p->ready_len[i]; k++)
      {
        cleanup_error sp_error_t err = NULL;
        struct sp_serve_sandbox *sb = p->ready[i][k];
        char q[SP_QUOTE_BUF_SIZE];
        char name[24];

        snprintf (name, sizeof (name), "%s", sb->name);
        if (sp_serve_sandbox_destroy (s, sb, &err) < 0)
          {
            sp_log (SP_LOG_WARNING, "sealed-probe-proxy: serve: pool: remove sandbox %s of `%s`: %s", name,
                    sp_quote_name (s->config->private_repos[i], q), sp_error_message (err));
            ret = -1;
          }
      }
  for (size_t i = 0; i < n; i++)
    sp_serve_report_waiting (s, i, 0);
  s->pool = NULL;
  pthread_cond_destroy (&p->cv);
  pool_free (p, n);
  return ret;
}
