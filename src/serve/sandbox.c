/* One sandbox from its creation to its removal: the part of an invocation
   that needs no request, so that it can be done ahead of one (pool.c), and
   the part that does (the script, the start).  Nothing a request sent is in
   a sandbox before sp_serve_sandbox_put_script.  */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/bounds.h"
#include "base/cleanup.h"
#include "bundle/bundle.h"

#include "serve/serve.h"

int
sp_serve_slot_claim (struct sp_serve *s)
{
  int slot = -1;

  pthread_mutex_lock (&s->lock);
  if (!s->stopping)
    for (unsigned i = 0; i < s->n_slots; i++)
      if (!s->slot_taken[i])
        {
          s->slot_taken[i] = true;
          slot = (int)i;
          break;
        }
  pthread_mutex_unlock (&s->lock);
  return slot;
}

bool
sp_serve_slot_free (struct sp_serve *s, unsigned slot)
{
  bool stopping;

  pthread_mutex_lock (&s->lock);
  s->active[slot] = NULL;
  s->slot_taken[slot] = false;
  stopping = s->stopping;
  pthread_mutex_unlock (&s->lock);
  return stopping;
}

bool
sp_serve_sandbox_activate (struct sp_serve *s, struct sp_serve_sandbox *sb)
{
  bool ok;

  pthread_mutex_lock (&s->lock);
  ok = !s->stopping;
  if (ok)
    s->active[sb->slot] = sb->container_id;
  pthread_mutex_unlock (&s->lock);
  return ok;
}

static void
workspace_limits (const struct sp_serve *s, const struct sp_serve_seed *seed, struct sp_workspace_limits *l)
{
  l->tmpfs_bytes = s->opt->scratch_bytes + SP_SERVE_WORKSPACE_OVERHEAD_BYTES;
  l->tmpfs_inodes = SP_SERVE_SCRATCH_INODES + 64;
  l->noexec = s->rules.workspaces_on_host;
  if (s->opt->snapshot == SP_SNAPSHOT_COPY)
    {
      l->tmpfs_bytes += seed->bytes;
      l->tmpfs_inodes += seed->entries;
    }
}

static void
sandbox_free (struct sp_serve_sandbox *sb)
{
  if (sb->script_fd >= 0)
    close (sb->script_fd);
  free (sb->name);
  free (sb->container_id);
  free (sb->cgroup_path);
  free (sb);
}

/* Removes what sb holds but its slot; -1 when something stayed.  */
static int
sandbox_remove (struct sp_serve *s, struct sp_serve_sandbox *sb, sp_error_t *err)
{
  cleanup_error sp_error_t ignored = NULL;
  int ret = 0;

  if (sb->handle != NULL)
    {
      ret = s->runtime->ops->destroy (s->runtime, sb->handle, err);
      sb->handle = NULL;
    }
  /* Nothing of the workspace stays open: an open file keeps its tmpfs
     from being unmounted.  */
  if (sb->script_fd >= 0)
    {
      close (sb->script_fd);
      sb->script_fd = -1;
    }
  /* The workspace after the container: its mounts are the container's.  */
  if (sp_workspace_destroy (&sb->ws, ret < 0 ? &ignored : err) < 0)
    ret = -1;
  return ret;
}

int
sp_serve_sandbox_make (struct sp_serve *s, size_t seed_index, unsigned slot, const char *name, bool ahead,
                       struct sp_serve_sandbox **out, bool *ran, struct sp_run_facts *facts, sp_error_t *err)
{
  static const struct sp_copy_options copy_limits = {
    .max_bytes = SP_SEED_MAX_BYTES,
    .max_entries = SP_SEED_MAX_ENTRIES,
    .max_depth = SP_SEED_MAX_DEPTH,
    .owner_writable = true,
  };
  const struct sp_serve_seed *seed = &s->seeds[seed_index];
  const struct sp_probe_identity *id = &s->identities[slot];
  cleanup_error sp_error_t ignored = NULL;
  cleanup_close int seed_fd = -1;
  struct sp_workspace_limits limits;
  struct sp_serve_sandbox *sb;
  struct sp_bundle_spec spec;

  *out = NULL;
  *ran = false;
  sb = calloc (1, sizeof (*sb));
  if (sb == NULL)
    return sp_make_error (err, errno, "allocate the sandbox");
  sb->seed_index = seed_index;
  sb->slot = slot;
  sb->ws = (struct sp_workspace){ .dirfd = -1, .bundle_dirfd = -1 };
  sb->script_fd = -1;
  sb->facts.exit_code = -1;
  spec = (struct sp_bundle_spec){
    .rootfs_root = s->rootfs.root_path,
    .rootfs_digest = s->rootfs.digest,
    .run_id = s->run_id,
    .invocation_id = name,
    .memory_limit_bytes = s->config->memory_limit_bytes,
    .interpreter = s->config->interpreter,
    .seccomp = s->seccomp,
    .rules = s->rules,
    .host_root_id = id->host_root_id,
    .host_probe_id = id->host_probe_id,
    .interpreter_waits = ahead && s->runtime->ops->starts_ahead,
  };
  sb->name = strdup (name);
  sb->container_id = sp_bundle_container_id (&spec);
  sb->cgroup_path = sp_bundle_cgroup_path (&spec);
  if (sb->name == NULL || sb->container_id == NULL || sb->cgroup_path == NULL)
    {
      sandbox_free (sb);
      return sp_make_error (err, ENOMEM, "allocate the sandbox");
    }
  workspace_limits (s, seed, &limits);
  if (sp_workspace_create (s->work_run_fd, s->work_run_path, name, &limits, &sb->ws, err) < 0)
    {
      sp_error_wrap (err, "workspace");
      sp_error_set_cause (err, SP_CAUSE_WORKSPACE);
      goto fail;
    }
  spec.bundle_dir = sb->ws.bundle_path;
  /* A directory fd of its own: a copy reads the seed's entries through it,
     and sandboxes are made at once.  */
  seed_fd = openat (seed->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (seed_fd < 0)
    {
      sp_make_error (err, errno, "open the seed");
      goto fail;
    }
  if (sp_bundle_write (sb->ws.bundle_dirfd, &spec, NULL, 0, err) < 0
      || sp_bundle_open_script (sb->ws.bundle_dirfd, &sb->script_fd, err) < 0
      || (spec.rules.tmp_on_host && sp_bundle_mount_tmp (sb->ws.bundle_dirfd, sb->ws.bundle_path, err) < 0))
    {
      sp_error_wrap (err, "bundle");
      sp_error_set_cause (err, SP_CAUSE_BUNDLE);
      goto fail;
    }
  /* Just before the snapshot, and again should it fail: a seed unmounted
     by hand fails its clone (EINVAL), which is the seed's going, not the
     proxy's failure.  */
  if (sp_serve_seed_check (s, seed_index, err) < 0)
    goto fail;
  if (sp_workspace_snapshot (&sb->ws, s->opt->snapshot, seed_fd, &copy_limits, id, err) < 0)
    {
      sp_error_t gone = NULL;

      if (sp_serve_seed_check (s, seed_index, &gone) < 0)
        {
          sp_error_release (err);
          *err = gone;
        }
      else
        {
          sp_error_wrap (err, "snapshot");
          sp_error_set_cause (err, SP_CAUSE_SNAPSHOT);
        }
      goto fail;
    }
  /* The snapshot is complete before `create`, and nothing changes it after:
     under gVisor the sentry caches the repository's mount as its own
     (bundle.h, repo_exclusive) and would not see a later change.  */
  if (s->runtime->ops->create != NULL)
    {
      const struct sp_runtime_job job = {
        .bundle_dir = sb->ws.bundle_path,
        .container_id = sb->container_id,
        .cgroup_path = sb->cgroup_path,
        .timeout_seconds = s->config->timeout_seconds,
        .start_ahead = spec.interpreter_waits,
      };

      *ran = true;
      if (s->runtime->ops->create (s->runtime, &job, &sb->facts, &sb->handle, err) < 0)
        {
          sp_error_wrap (err, "runtime");
          sp_error_set_cause (err, SP_CAUSE_RUNTIME);
          goto fail;
        }
    }
  *out = sb;
  return 0;

fail:
  if (facts != NULL)
    *facts = sb->facts;
  (void)sandbox_remove (s, sb, &ignored);
  sandbox_free (sb);
  return -1;
}

/* Looks up every entry below dirfd, depth first, until budget entries;
   returns what is left of the budget.  Nothing is followed, opened for
   reading or written: only directories are opened, to list them.  */
static uint64_t
warm_dir (int dirfd, unsigned depth, uint64_t budget)
{
  DIR *dir;
  struct dirent *de;
  int fd;

  if (budget == 0 || depth > SP_SEED_MAX_DEPTH)
    return budget;
  fd = dup (dirfd);
  if (fd < 0)
    return budget;
  dir = fdopendir (fd);
  if (dir == NULL)
    {
      close (fd);
      return budget;
    }
  while (budget > 0 && (de = readdir (dir)) != NULL)
    {
      struct stat st;
      int sub;

      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
        continue;
      budget--;
      if (fstatat (dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR (st.st_mode))
        continue;
      sub = openat (dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub >= 0)
        {
          budget = warm_dir (sub, depth + 1, budget);
          close (sub);
        }
    }
  closedir (dir);
  return budget;
}

void
sp_serve_sandbox_warm (struct sp_serve_sandbox *sb, uint64_t max_entries)
{
  cleanup_close int repo_fd = -1;

  repo_fd = openat (sb->ws.bundle_dirfd, SP_BUNDLE_REPO, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (repo_fd >= 0)
    (void)warm_dir (repo_fd, 0, max_entries);
}

/* The runtime's part of a run: `start` of the sandbox created ahead, or
   `run` of its bundle.  */
static int
sandbox_start (struct sp_serve *s, struct sp_serve_sandbox *sb, uint32_t timeout_seconds, sp_error_t *err)
{
  const struct sp_runtime_job job = {
    .bundle_dir = sb->ws.bundle_path,
    .container_id = sb->container_id,
    .cgroup_path = sb->cgroup_path,
    .timeout_seconds = timeout_seconds,
  };

  sb->ran = true;
  if (sb->handle != NULL)
    return s->runtime->ops->start (s->runtime, sb->handle, &sb->facts, err);
  return s->runtime->ops->run (s->runtime, &job, &sb->facts, err);
}

/* After the run: a seed gone meanwhile makes any answer worthless, and
   its error is the one that counts (the runtime's, if any, is added).  */
static int
seed_still_there (struct sp_serve *s, struct sp_serve_sandbox *sb, int ran, sp_error_t *err)
{
  sp_error_t gone = NULL;

  if (sp_serve_seed_check (s, sb->seed_index, &gone) == 0)
    return ran;
  sb->seed_gone = true;
  if (ran < 0)
    {
      sp_error_t both = NULL;

      sp_make_error (&both, 0, "%s (and the runtime: %s)", sp_error_message (gone), sp_error_message (*err));
      sp_error_set_cause (&both, sp_error_cause (gone));
      sp_error_release (&gone);
      sp_error_release (err);
      gone = both;
    }
  *err = gone;
  return -1;
}

int
sp_serve_sandbox_put_script (struct sp_serve *s, struct sp_serve_sandbox *sb, const void *script,
                             size_t script_len, sp_error_t *err)
{
  /* A sandbox made ahead may have waited long: nothing starts on a seed
     that is gone (its answer would be discarded anyway).  */
  if (sp_serve_seed_check (s, sb->seed_index, err) < 0)
    {
      sb->seed_gone = true;
      return -1;
    }
  if (sb->script_fd < 0)
    {
      sp_make_error (err, 0, "%s: the script goes in once", SP_BUNDLE_SCRIPT);
      sp_error_set_cause (err, SP_CAUSE_BUNDLE);
      return sp_error_wrap (err, "bundle");
    }
  if (sp_bundle_put_script (sb->script_fd, script, script_len, err) < 0)
    {
      sp_error_set_cause (err, SP_CAUSE_BUNDLE);
      return sp_error_wrap (err, "bundle");
    }
  close (sb->script_fd);
  sb->script_fd = -1;
  return 0;
}

int
sp_serve_sandbox_start (struct sp_serve *s, struct sp_serve_sandbox *sb, uint32_t timeout_seconds,
                        sp_error_t *err)
{
  return seed_still_there (s, sb, sandbox_start (s, sb, timeout_seconds, err), err);
}

int
sp_serve_sandbox_destroy (struct sp_serve *s, struct sp_serve_sandbox *sb, sp_error_t *err)
{
  int ret;

  if (sb == NULL)
    return 0;
  ret = sandbox_remove (s, sb, err);
  /* The slot (and so the probe's identity) is free again only once its
     sandbox is gone.  */
  sp_serve_slot_free (s, sb->slot);
  sandbox_free (sb);
  return ret;
}
