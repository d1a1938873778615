/* serve's ends: a stop (every running container killed, nothing new
   started), a halt (every request refused from then on, for a failure the
   proxy cannot answer for), and the teardown that removes everything of the
   run (docs/operations.md, "Stopping").  */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "os/log.h"
#include "base/cleanup.h"
#include "os/state_lock.h"

#include "serve/serve.h"

bool
sp_serve_stopping (struct sp_serve *s)
{
  bool stopping;

  pthread_mutex_lock (&s->lock);
  stopping = s->stopping;
  pthread_mutex_unlock (&s->lock);
  return stopping;
}

unsigned
sp_serve_stop (struct sp_serve *s)
{
  unsigned running = 0;

  pthread_mutex_lock (&s->lock);
  s->stopping = true;
  /* Answers held for their release go now (releaser.c).  */
  if (s->release_cv_ready)
    pthread_cond_broadcast (&s->release_cv);
  for (unsigned i = 0; i < s->n_slots; i++)
    if (s->active[i] != NULL)
      {
        sp_error_t err = NULL;

        running++;
        if (s->runtime->ops->kill (s->runtime, s->active[i], &err) < 0)
          sp_error_release (&err);
      }
  pthread_mutex_unlock (&s->lock);
  return running;
}

void
sp_serve_halt (struct sp_serve *s, const char *why)
{
  bool first;

  pthread_mutex_lock (&s->lock);
  first = !s->halted;
  if (first)
    {
      s->halted = true;
      snprintf (s->halt_reason, sizeof (s->halt_reason), "%s", why);
    }
  pthread_mutex_unlock (&s->lock);
  if (first)
    sp_log (SP_LOG_ERR,
            "sealed-probe-proxy: serve: halted: %s: from now on every request gets ERROR and nothing runs; "
            "fix the cause, then restart serve (docs/operations.md)",
            why);
}

bool
sp_serve_halted (struct sp_serve *s, char *why, size_t size)
{
  bool h;

  pthread_mutex_lock (&s->lock);
  h = s->halted;
  if (h)
    snprintf (why, size, "%s", s->halt_reason);
  pthread_mutex_unlock (&s->lock);
  return h;
}

int
sp_serve_teardown (struct sp_serve *s, sp_error_t *err)
{
  sp_error_t step = NULL;
  int ret = 0;

  /* A runtime that failed its verify is not asked to do anything more.  */
  if (s->runtime != NULL && s->runtime_verified
      && s->runtime->ops->cleanup_orphans (s->runtime, true, NULL, &step) < 0)
    {
      ret = -1;
      *err = step;
      step = NULL;
    }
  /* The containers are gone: the private rootfs can go too.  */
  sp_serve_rootfs_private_release (s);
  sp_closep (&s->work_run_fd);
  if (s->work_fd >= 0 && sp_workspace_remove_runs (s->work_fd, NULL, NULL, &step) < 0)
    {
      if (ret == 0)
        *err = step;
      else
        sp_error_release (&step);
      ret = -1;
    }
  /* This state directory's work directory goes too once it is empty; the
     next start makes it again.  */
  if (s->work_path != NULL && ret == 0)
    (void)rmdir (s->work_path);
  sp_runtime_closep (&s->runtime);
  if (s->identities != NULL)
    for (unsigned i = 0; i < s->n_slots; i++)
      sp_probe_identity_release (&s->identities[i]);
  free (s->identities);
  sp_closep (&s->work_fd);
  free (s->work_run_path);
  free (s->work_path);
  if (s->seeds != NULL)
    for (size_t i = 0; i < s->config->n_private_repos; i++)
      {
        sp_closep (&s->seeds[i].dirfd);
        sp_closep (&s->seeds[i].host_fd);
        free (s->seeds[i].path);
      }
  free (s->seeds);
  sp_staged_release (&s->staged);
  sp_audit_closep (&s->audit);
  sp_ledger_closep (&s->ledger);
  sp_seccomp_profile_freep (&s->seccomp);
  sp_rootfs_info_release (&s->rootfs);
  /* Last of what the state directory holds: the next owner finds nothing
     of this run.  */
  sp_state_lock_release (s->state_fd, &s->owner_lock_fd);
  sp_closep (&s->state_fd);
  /* Only sp_serve_setup, which sets config first, sets it.  */
  if (s->config != NULL)
    {
      sp_closep (&s->host_state_fd);
      sp_closep (&s->host_mnt_ns_fd);
    }
  free (s->state_path);
  free (s->active);
  free (s->slot_taken);
  memset (s, 0, sizeof (*s));
  s->state_fd = s->work_fd = s->work_run_fd = s->owner_lock_fd = s->host_state_fd = s->host_mnt_ns_fd = -1;
  return ret;
}
