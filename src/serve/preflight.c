/* serve's preflight: every guarantee is established before the proxy says it
   is ready, or the proxy refuses to start (docs/operations.md).  */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "os/log.h"
#include "base/bounds.h"
#include "base/cleanup.h"
#include "base/quote.h"
#include "bundle/bundle.h"
#include "os/open_beneath.h"
#include "os/state_lock.h"
#include "tree/walk.h"

#include "serve/serve.h"

#define TMPFS_PAGE 4096ULL

/* What a start removed of earlier runs (docs/operations.md, "A start after
   kill -9"): one line on stderr per kind of thing, each naming what went,
   and nothing when nothing was left.  The modules below return what they
   removed as values; only this says it.  */
static void __attribute__ ((format (printf, 2, 3)))
say_removed (const struct sp_serve *s, const char *fmt, ...)
{
  cleanup_free char *what = NULL;
  va_list ap;
  int n;

  va_start (ap, fmt);
  n = vasprintf (&what, fmt, ap);
  va_end (ap);
  if (n < 0)
    what = NULL;
  /* A notice: a leftover is expected after kill -9, and it is gone now.  */
  sp_log (SP_LOG_NOTICE, "sealed-probe-proxy: %s: removed %s", s->opt->verb != NULL ? s->opt->verb : "serve",
          what != NULL ? what : "leftovers of an earlier run (out of memory to say which)");
}

enum orphan_kind
{
  ORPHAN_CONTAINERS,
  ORPHAN_CGROUPS,
};

static unsigned
orphan_count (const struct sp_orphan_run *run, enum orphan_kind kind)
{
  return kind == ORPHAN_CONTAINERS ? run->containers : run->cgroups;
}

/* "N containers of earlier runs, by run: RUN (N), RUN (N)", naming at most
   SP_SERVE_LEFTOVERS_NAMED_MAX runs; nothing when none went.  */
static void
say_orphans_of_kind (const struct sp_serve *s, const struct sp_orphans_removed *r, enum orphan_kind kind,
                     const char *noun)
{
  cleanup_free char *list = NULL;
  size_t list_len = 0, named = 0, more = 0;
  unsigned total = 0;
  FILE *f = open_memstream (&list, &list_len);

  if (f == NULL)
    return;
  for (size_t i = 0; i < r->n; i++)
    {
      unsigned n = orphan_count (&r->runs[i], kind);

      if (n == 0)
        continue;
      total += n;
      if (named++ < SP_SERVE_LEFTOVERS_NAMED_MAX)
        fprintf (f, "%s%s (%u)", named > 1 ? ", " : "", r->runs[i].run, n);
      else
        more++;
    }
  if (more > 0)
    fprintf (f, ", and %zu more run%s", more, more == 1 ? "" : "s");
  if (fclose (f) != 0 || total == 0)
    return;
  say_removed (s, "%u %s%s of earlier runs, by run: %s", total, noun, total == 1 ? "" : "s", list);
}

static void
say_orphans (const struct sp_serve *s, const struct sp_orphans_removed *r)
{
  cleanup_free char *list = NULL;
  size_t list_len = 0, named = 0, more = 0;
  FILE *f;

  say_orphans_of_kind (s, r, ORPHAN_CONTAINERS, "container");
  say_orphans_of_kind (s, r, ORPHAN_CGROUPS, "cgroup");
  f = open_memstream (&list, &list_len);
  if (f == NULL)
    return;
  for (size_t i = 0; i < r->n; i++)
    if (r->runs[i].state_dir && named++ < SP_SERVE_LEFTOVERS_NAMED_MAX)
      fprintf (f, "%s`%s/%s/%s`", named > 1 ? ", " : "", s->state_path,
               sp_runtime_binary_name (s->config->runtime), r->runs[i].run);
    else if (r->runs[i].state_dir)
      more++;
  if (more > 0)
    fprintf (f, ", and %zu more", more);
  if (fclose (f) == 0 && named > 0)
    say_removed (s, "the %s state director%s of earlier runs: %s",
                 sp_runtime_binary_name (s->config->runtime), named == 1 ? "y" : "ies", list);
}

static void
say_workspaces (const struct sp_serve *s, const struct sp_workspace_removed *r)
{
  cleanup_free char *list = NULL;
  size_t list_len = 0;
  FILE *f;

  if (r->n == 0 || (f = open_memstream (&list, &list_len)) == NULL)
    return;
  for (size_t i = 0; i < r->n && i < SP_SERVE_LEFTOVERS_NAMED_MAX; i++)
    {
      fprintf (f, "%s%s (%u entr%s", i > 0 ? ", " : "", r->runs[i].run, r->runs[i].entries,
               r->runs[i].entries == 1 ? "y" : "ies");
      if (r->runs[i].mounts > 0)
        fprintf (f, ", %u still mounted", r->runs[i].mounts);
      fputc (')', f);
    }
  if (r->n > SP_SERVE_LEFTOVERS_NAMED_MAX)
    fprintf (f, ", and %zu more", r->n - SP_SERVE_LEFTOVERS_NAMED_MAX);
  if (fclose (f) == 0)
    say_removed (s, "the workspaces of %zu earlier run%s in `%s`: %s", r->n, r->n == 1 ? "" : "s",
                 s->work_path, list);
}

/* ids (ascending) as ranges, "2100000000-2100000003, 2100000010".  */
static void
say_id_locks (const struct sp_serve *s, const char *dir, const uint32_t *ids, size_t n)
{
  cleanup_free char *list = NULL;
  size_t list_len = 0, ranges = 0, more = 0;
  FILE *f;

  if (n == 0 || (f = open_memstream (&list, &list_len)) == NULL)
    return;
  for (size_t i = 0; i < n;)
    {
      size_t j = i;

      while (j + 1 < n && ids[j + 1] == ids[j] + 1)
        j++;
      if (ranges++ < SP_SERVE_LEFTOVERS_NAMED_MAX)
        {
          fprintf (f, "%s%" PRIu32, ranges > 1 ? ", " : "", ids[i]);
          if (j > i)
            fprintf (f, "-%" PRIu32, ids[j]);
        }
      else
        more += j - i + 1;
      i = j + 1;
    }
  if (more > 0)
    fprintf (f, ", and %zu more", more);
  if (fclose (f) == 0)
    say_removed (s, "%zu probe-id lock file%s that no serve held, left in `%s` by earlier runs: host id%s %s",
                 n, n == 1 ? "" : "s", dir, n == 1 ? "" : "s", list);
}

struct measure
{
  uint64_t bytes;
  uint64_t entries;
};

/* A tmpfs stores each file in whole pages: count them so, so that copy mode's
   tmpfs fits the seed exactly plus the scratch allowance.  */
static int
measure_entry (int dirfd, const char *name, const char *path, const struct stat *st,
               enum sp_tree_walk_event event, void *ctx_, sp_error_t *err)
{
  struct measure *m = ctx_;

  (void)dirfd, (void)name, (void)path, (void)err;
  if (event != SP_TREE_WALK_ENTRY)
    return 0;
  m->entries++;
  if (S_ISREG (st->st_mode) || S_ISLNK (st->st_mode))
    m->bytes += ((uint64_t)st->st_size + TMPFS_PAGE - 1) / TMPFS_PAGE * TMPFS_PAGE;
  return 0;
}

/* What is wrong with the seed as one mount namespace shows it, or NULL
   when the path (path, looked up from at_fd) still leads to the very mount
   serve verified, read-only still.  Looked up anew each time: once that
   mount is unmounted (a host's `umount -l` reaches serve's own namespace
   too) or covered, the path leads to another mount, whose id can never be
   this one's while held_fd holds it.  */
static const char *
view_changed (int at_fd, const char *path, int held_fd, uint64_t mnt_id, const struct sp_serve_seed *seed,
              int *errnum)
{
  struct statx now;
  struct statvfs vfs;

  *errnum = 0;
  if (statx (at_fd, path, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_INO | STATX_MNT_ID, &now) < 0)
    {
      *errnum = errno;
      return errno == ENOENT ? "its directory is gone" : "its directory cannot be looked up";
    }
  if (!(now.stx_mask & STATX_MNT_ID) || now.stx_mnt_id != mnt_id)
    return "its read-only mount is not there any more";
  if (makedev (now.stx_dev_major, now.stx_dev_minor) != seed->dev || now.stx_ino != seed->ino)
    return "another directory is there";
  /* The mount itself: remounted read-write, its files could change.  */
  if (fstatvfs (held_fd, &vfs) < 0)
    {
      *errnum = errno;
      return "its mount cannot be examined";
    }
  if (!(vfs.f_flag & ST_RDONLY))
    return "its mount is read-write now";
  return NULL;
}

int
sp_serve_seed_check (const struct sp_serve *s, size_t seed_index, sp_error_t *err)
{
  const struct sp_serve_seed *seed = &s->seeds[seed_index];
  const char *where = "";
  const char *what;
  char q[SP_QUOTE_BUF_SIZE];
  int errnum = 0;

  if (seed->dirfd < 0 || seed->path == NULL)
    what = "serve holds no seed for it";
  else if ((what = view_changed (AT_FDCWD, seed->path, seed->dirfd, seed->mnt_id, seed, &errnum)) == NULL
           && seed->host_fd >= 0
           && (what
               = view_changed (s->host_state_fd, seed->rel, seed->host_fd, seed->host_mnt_id, seed, &errnum))
                  != NULL)
    where = " in the host's mount namespace";
  if (what == NULL)
    return 0;
  sp_make_error (
      err, errnum,
      "the seed of `%s` is no longer mounted where serve verified it (%s%s): unstaged or unmounted by "
      "hand while serve ran; stage again and restart serve",
      sp_quote_name (s->config->private_repos[seed_index], q), what, where);
  return sp_error_set_cause (err, SP_CAUSE_SEED_GONE);
}

/* The id of the mount fd is on, and the inode it names.  */
static int
mount_of (int fd, uint64_t *mnt_id, dev_t *dev, ino_t *ino, sp_error_t *err)
{
  struct statx sx;

  if (statx (fd, "", AT_EMPTY_PATH, STATX_INO | STATX_MNT_ID, &sx) < 0)
    return sp_make_error (err, errno, "statx");
  if (!(sx.stx_mask & STATX_MNT_ID))
    return sp_make_error (err, 0, "the kernel does not tell its mount's id (Linux 5.8 or later does)");
  *mnt_id = sx.stx_mnt_id;
  *dev = makedev (sx.stx_dev_major, sx.stx_dev_minor);
  *ino = sx.stx_ino;
  return 0;
}

/* Records the mount the seed is on, through the fd serve keeps (and, for
   runc and gvisor, the host's view of it): what sp_serve_seed_check holds
   it to from now on.  */
static int
seed_mount_record (struct sp_serve *s, struct sp_serve_seed *seed, sp_error_t *err)
{
  dev_t dev;
  ino_t ino;

  if (asprintf (&seed->path, "%s/%s/%s/%u", s->state_path, SP_SEEDS_DIR, s->staged.run, seed->seed->index)
      < 0)
    {
      seed->path = NULL;
      return sp_make_error (err, errno, "allocate a path");
    }
  seed->rel = seed->path + strlen (s->state_path) + 1;
  if (mount_of (seed->dirfd, &seed->mnt_id, &seed->dev, &seed->ino, err) < 0)
    return -1;
  if (s->host_state_fd < 0)
    return 0;
  seed->host_fd = sp_open_beneath (s->host_state_fd, seed->rel, O_PATH | O_DIRECTORY);
  if (seed->host_fd < 0)
    return sp_make_error (err, errno, "open it as the host's mount namespace shows it");
  if (mount_of (seed->host_fd, &seed->host_mnt_id, &dev, &ino, err) < 0)
    return -1;
  if (dev != seed->dev || ino != seed->ino)
    return sp_make_error (err, 0, "the host's mount namespace shows another directory at its path");
  return 0;
}

static int
open_seeds (struct sp_serve *s, sp_error_t *err)
{
  const struct sp_config *config = s->config;

  if (sp_staged_load (s->state_fd, &s->staged, err) < 0)
    return sp_error_wrap (err, "--state: %s", SP_STAGED_FILE);
  s->seeds = calloc (config->n_private_repos, sizeof (*s->seeds));
  if (s->seeds == NULL)
    return sp_make_error (err, errno, "allocate the seeds");
  for (size_t i = 0; i < config->n_private_repos; i++)
    s->seeds[i].dirfd = s->seeds[i].host_fd = -1;
  for (size_t i = 0; i < config->n_private_repos; i++)
    {
      const char *repo = config->private_repos[i];
      struct sp_serve_seed *seed = &s->seeds[i];
      struct measure m = { 0 };

      seed->seed = sp_staged_find (&s->staged, repo);
      if (seed->seed == NULL)
        return sp_make_error (
            err, 0, "sealedProbes.privateRepos: `%s` has no staged seed (run `sealed-probe-proxy stage`)",
            repo);
      /* Opened and its mount recorded first, then verified, then found
         still on that mount: what was digested is what serve holds.  */
      seed->dirfd = sp_seed_open (s->state_fd, s->staged.run, seed->seed->index, err);
      if (seed->dirfd < 0)
        return sp_error_wrap (err, "seed of `%s`", repo);
      if (seed_mount_record (s, seed, err) < 0)
        return sp_error_wrap (err, "seed of `%s`: its mount", repo);
      if (sp_seed_verify (s->state_fd, s->staged.run, seed->seed, err) < 0)
        return sp_error_wrap (err, "seed of `%s`", repo);
      if (sp_serve_seed_check (s, i, err) < 0)
        return -1;
      /* Only copy mode's tmpfs holds the seed itself.  */
      if (s->opt->snapshot == SP_SNAPSHOT_COPY && sp_tree_walk (seed->dirfd, measure_entry, &m, err) < 0)
        return sp_error_wrap (err, "measure the seed of `%s`", repo);
      seed->bytes = m.bytes;
      seed->entries = m.entries;
    }
  return 0;
}

/* dirfd/name, made 0711 when absent; it must be a directory of root's that
   nobody else may write, and that every id may search: the sandboxes'
   user-namespace roots walk through it to their mount sources.  */
static int
open_work_dir (int dirfd, const char *name, const char *shown, sp_error_t *err)
{
  cleanup_close int fd = -1;
  struct stat st;
  bool made = mkdirat (dirfd, name, 0711) == 0;

  if (!made && errno != EEXIST)
    return sp_make_error (err, errno, "make `%s`", shown);
  fd = openat (dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 || fstat (fd, &st) < 0)
    return sp_make_error (err, errno, "open `%s`", shown);
  if (st.st_uid != 0 || (st.st_mode & 022) != 0)
    return sp_make_error (err, 0, "`%s` must be root's and writable by no one else", shown);
  /* mkdir's mode passed through the umask (a unit's UMask=0077 gives 0700):
     what serve makes is 0711 exactly, whatever its umask.  */
  if (made && fchmod (fd, 0711) < 0)
    return sp_make_error (err, errno, "make `%s` mode 0711", shown);
  if (!made && (st.st_mode & 0111) != 0111)
    return sp_make_error (err, 0,
                          "`%s` must be searchable by every id (mode 0711 or wider): the sandboxes' "
                          "user-namespace roots pass through it",
                          shown);
  return get_and_reset_fd (&fd);
}

/* RUN_DIR/work/KEY/RUN, where KEY names the state directory (its
   device and inode), after the leftovers of this state's earlier runs are
   gone.  The workspaces live outside STATE, which is root's alone: the
   sandbox's user-namespace root, an unprivileged host id, must reach every
   mount source.  Their mounts are made in serve's own mount namespace, so
   the host sees only empty directories here.  */
static int
open_work (struct sp_serve *s, sp_error_t *err)
{
  cleanup_close int run_dir = -1, root = -1;
  cleanup_free char *root_path = NULL;
  struct stat st;
  char key[64];

  if (fstat (s->state_fd, &st) < 0)
    return sp_make_error (err, errno, "--state: stat");
  snprintf (key, sizeof (key), "%jx-%jx", (uintmax_t)st.st_dev, (uintmax_t)st.st_ino);
  if (s->rules.workspaces_on_host)
    {
      /* Docker and sbx: in the host's mount namespace, under the state
         directory, where --docker-state-dir maps every path for dockerd.  */
      const char *name = s->config->runtime == SP_RUNTIME_SBX ? SP_SERVE_SBX_WORK : SP_SERVE_DOCKER_WORK;

      if (asprintf (&s->work_path, "%s/%s", s->state_path, name) < 0)
        {
          s->work_path = NULL;
          return sp_make_error (err, errno, "allocate a path");
        }
      s->work_fd = open_work_dir (s->state_fd, name, s->work_path, err);
    }
  else
    {
      if (asprintf (&root_path, "%s/%s", s->opt->run_dir, SP_SERVE_RUN_WORK) < 0
          || asprintf (&s->work_path, "%s/%s", root_path, key) < 0)
        {
          s->work_path = NULL;
          return sp_make_error (err, errno, "allocate a path");
        }
      run_dir = open_work_dir (AT_FDCWD, s->opt->run_dir, s->opt->run_dir, err);
      if (run_dir < 0)
        return sp_error_wrap (err, "--run-dir");
      root = open_work_dir (run_dir, SP_SERVE_RUN_WORK, root_path, err);
      if (root < 0)
        return -1;
      s->work_fd = open_work_dir (root, key, s->work_path, err);
    }
  if (s->work_fd < 0)
    return -1;
  {
    cleanup_workspace_removed struct sp_workspace_removed removed = { 0 };
    int ret = sp_workspace_remove_runs (s->work_fd, NULL, &removed, err);

    say_workspaces (s, &removed);
    if (ret < 0)
      return sp_error_wrap (err, "remove the workspaces of earlier runs");
  }
  if (asprintf (&s->work_run_path, "%s/%s", s->work_path, s->run_id) < 0)
    {
      s->work_run_path = NULL;
      return sp_make_error (err, errno, "allocate a path");
    }
  s->work_run_fd = open_work_dir (s->work_fd, s->run_id, s->work_run_path, err);
  return s->work_run_fd < 0 ? -1 : 0;
}

/* The sandbox slots: one per worker, one for the canary, and the pool's.
   A backend that cannot create ahead has no pool: it starts every sandbox
   cold, and says so.  */
static int
make_slots (struct sp_serve *s, sp_error_t *err)
{
  uint64_t wanted = (uint64_t)s->opt->pool * s->config->n_private_repos;

  if (s->opt->pool > 0 && s->runtime->ops->create == NULL)
    sp_log (
        SP_LOG_WARNING,
        "sealed-probe-proxy: serve: --pool %u: runtime `%s` cannot create a sandbox ahead of its request: "
        "every sandbox starts cold",
        s->opt->pool, s->runtime->ops->name);
  else if (wanted > SP_SERVE_POOL_SLOTS_MAX)
    {
      s->pool_slots = SP_SERVE_POOL_SLOTS_MAX;
      sp_log (SP_LOG_WARNING,
              "sealed-probe-proxy: serve: --pool %u for %zu repositories: at most %d sandboxes wait in all, "
              "shared out in the config's order; a request that finds none for its repository starts cold",
              s->opt->pool, s->config->n_private_repos, SP_SERVE_POOL_SLOTS_MAX);
    }
  else
    s->pool_slots = (unsigned)wanted;
  s->n_slots = s->opt->concurrency + 1 + s->pool_slots;
  s->active = calloc (s->n_slots, sizeof (*s->active));
  s->slot_taken = calloc (s->n_slots, sizeof (*s->slot_taken));
  if (s->active == NULL || s->slot_taken == NULL)
    return sp_make_error (err, errno, "allocate the sandbox slots");
  return 0;
}

/* The probes' identities, one per slot, from a range nobody else holds.  */
static int
make_identities (struct sp_serve *s, sp_error_t *err)
{
  unsigned slots = s->n_slots;
  cleanup_close int run_dir = -1;
  cleanup_close int lock_dir = -1;
  cleanup_free char *ids_path = NULL;

  /* The ids' locks, first: another proxy's probes may not be running just
     now, but its range is its own all the same.  */
  if (asprintf (&ids_path, "%s/%s", s->opt->run_dir, SP_SERVE_RUN_IDS) < 0)
    {
      ids_path = NULL;
      return sp_make_error (err, errno, "allocate a path");
    }
  run_dir = open_work_dir (AT_FDCWD, s->opt->run_dir, s->opt->run_dir, err);
  if (run_dir < 0)
    return sp_error_wrap (err, "--run-dir");
  lock_dir = open_work_dir (run_dir, SP_SERVE_RUN_IDS, ids_path, err);
  if (lock_dir < 0)
    return -1;
  /* Those nobody holds are an earlier run's, killed before its release.  */
  {
    cleanup_free uint32_t *stale = NULL;
    size_t n_stale = 0;
    int ret = sp_probe_identity_sweep (lock_dir, &stale, &n_stale, err);

    say_id_locks (s, ids_path, stale, n_stale);
    if (ret < 0)
      return sp_error_wrap (err, "`%s`", ids_path);
  }
  s->identities = calloc (slots, sizeof (*s->identities));
  if (s->identities == NULL)
    return sp_make_error (err, errno, "allocate the probe identities");
  for (unsigned i = 0; i < slots; i++)
    s->identities[i] = (struct sp_probe_identity){
      .idmap_userns_fd = -1, .root_lock_fd = -1, .probe_lock_fd = -1, .lock_dirfd = -1
    };
  for (unsigned i = 0; i < slots; i++)
    if (sp_probe_identity_make (s->opt->probe_id_base, i, lock_dir, &s->identities[i], err) < 0)
      return sp_error_wrap (err, "--probe-ids %" PRIu32 ": probe identity of slot %u", s->opt->probe_id_base,
                            i);
  if (sp_probe_identity_range_free (s->opt->probe_id_base, SP_PROBE_IDS_PER_SLOT * slots, err) < 0)
    return sp_error_wrap (err, "--probe-ids %" PRIu32 ": the probes' id range is not free",
                          s->opt->probe_id_base);
  return 0;
}

/* The runtime's own options: its binary option must be the one for the
   config's runtime, never another's (a --runc with runtime gvisor would
   otherwise be silently unused).  */
static int
runtime_options (enum sp_runtime kind, const struct sp_serve_options *opt,
                 struct sp_runtime_settings *settings, const char **binary_option, sp_error_t *err)
{
  *settings = (struct sp_runtime_settings){ 0 };
  *binary_option = NULL;
  if (opt->runc != NULL && kind != SP_RUNTIME_RUNC)
    return sp_make_error (err, 0, "--runc: sealedProbes.runtime is `%s`, not `runc`", sp_runtime_name (kind));
  if (opt->runsc != NULL && kind != SP_RUNTIME_GVISOR)
    return sp_make_error (err, 0, "--runsc: sealedProbes.runtime is `%s`, not `gvisor`",
                          sp_runtime_name (kind));
  if (opt->gvisor_platform != NULL && kind != SP_RUNTIME_GVISOR)
    return sp_make_error (err, 0, "--gvisor-platform: sealedProbes.runtime is `%s`, not `gvisor`",
                          sp_runtime_name (kind));
  if ((opt->docker_socket != NULL || opt->docker_state_dir != NULL) && kind != SP_RUNTIME_DOCKER)
    return sp_make_error (err, 0, "--%s: sealedProbes.runtime is `%s`, not `docker`",
                          opt->docker_socket ? "docker-socket" : "docker-state-dir", sp_runtime_name (kind));
  if ((opt->sbx != NULL || opt->sbx_template != NULL) && kind != SP_RUNTIME_SBX)
    return sp_make_error (err, 0, "--%s: sealedProbes.runtime is `%s`, not `sbx`",
                          opt->sbx ? "sbx" : "sbx-template", sp_runtime_name (kind));
  if (kind == SP_RUNTIME_RUNC)
    {
      settings->binary = opt->runc;
      *binary_option = "--runc";
    }
  else if (kind == SP_RUNTIME_GVISOR)
    {
      settings->binary = opt->runsc;
      settings->gvisor_platform = opt->gvisor_platform;
      *binary_option = "--runsc";
    }
  else if (kind == SP_RUNTIME_DOCKER)
    {
      settings->docker_socket = opt->docker_socket;
      settings->docker_state_dir = opt->docker_state_dir;
      *binary_option = "--docker-socket";
    }
  else if (kind == SP_RUNTIME_SBX)
    {
      settings->binary = opt->sbx;
      settings->sbx_template = opt->sbx_template;
      *binary_option = "--sbx";
    }
  return 0;
}

int
sp_serve_preflight (struct sp_serve *s, const struct sp_serve_options *opt, sp_error_t *err)
{
  struct sp_runtime_settings settings;
  const char *binary_option;

  s->opt = opt;
  s->state_fd = s->work_fd = s->work_run_fd = s->owner_lock_fd = -1;
  atomic_init (&s->next_invocation, 1);
  pthread_mutex_init (&s->lock, NULL);

  if (sp_serve_check_sensitivity (s->config, opt, err) < 0)
    return -1;
  if (sp_state_open (opt->state, 0, &s->state_fd, err) < 0)
    return sp_error_wrap (err, "--state: `%s`", opt->state);
  /* First: nothing below may race a stage, an unstage or another serve on
     the same seeds, ledger and leftovers.  */
  if (sp_state_lock_take (s->state_fd, opt->state, opt->verb, &s->owner_lock_fd, err) < 0)
    return sp_error_wrap (err, "--state");
  s->state_path = realpath (opt->state, NULL);
  if (s->state_path == NULL)
    return sp_make_error (err, errno, "--state: `%s`", opt->state);
  if (open_seeds (s, err) < 0)
    return -1;
  if (sp_rootfs_verify (opt->rootfs, &s->rootfs, err) < 0)
    return sp_error_wrap (err, "--rootfs: `%s`", opt->rootfs);
  if (sp_seccomp_profile_load_builtin (&s->seccomp, err) < 0)
    return sp_error_wrap (err, "seccomp profile");
  /* The ledger's lock makes this the only proxy of this state directory, so
     what follows may treat every other run's leftovers as orphans.  */
  if (sp_ledger_open (s->state_fd, s->config->max_invocations, s->opt->run_bit_budget_millibits, &s->ledger,
                      err)
      < 0)
    return sp_error_wrap (err, "--state: budget");
  if (sp_audit_open (s->state_fd, &s->audit, err) < 0)
    return sp_error_wrap (err, "--state: audit log");
  if (sp_bundle_id_make (NULL, s->run_id, err) < 0)
    return -1;

  if (runtime_options (s->config->runtime, opt, &settings, &binary_option, err) < 0)
    return -1;
  settings.state_dir = s->state_path;
  settings.run_id = s->run_id;
  if (sp_runtime_open (s->config->runtime, &settings, &s->runtime, err) < 0)
    return sp_error_wrap (err, "sealedProbes.runtime");
  if (s->runtime->ops->verify (s->runtime, err) < 0)
    {
      if (settings.binary != NULL || settings.docker_socket != NULL)
        return sp_error_wrap (err, "%s", binary_option);
      return sp_error_wrap (err, "runtime `%s`", sp_runtime_name (s->config->runtime));
    }
  s->runtime_verified = true;
  {
    cleanup_orphans_removed struct sp_orphans_removed removed = { 0 };
    int ret = s->runtime->ops->cleanup_orphans (s->runtime, false, &removed, err);

    say_orphans (s, &removed);
    if (ret < 0)
      return sp_error_wrap (err, "remove the containers of earlier runs");
  }
  if (make_slots (s, err) < 0)
    return -1;
  /* After the orphans: a sandbox of an earlier run no longer holds an id.  */
  if (make_identities (s, err) < 0)
    return -1;
  if (open_work (s, err) < 0)
    return -1;
  if (sp_serve_rootfs_private (s, err) < 0)
    return sp_error_wrap (err, "--rootfs: `%s`", opt->rootfs);
  if (s->runtime->ops->prepare (s->runtime, err) < 0)
    return sp_error_wrap (err, "prepare the runtime");
  /* From the private copy, verified as a whole: what every probe runs.  */
  if (s->runtime->ops->use_rootfs != NULL
      && s->runtime->ops->use_rootfs (s->runtime, s->rootfs.root_path, s->rootfs.digest, err) < 0)
    return sp_error_wrap (err, "runtime `%s`", sp_runtime_name (s->config->runtime));
  return 0;
}

int
sp_serve_setup (struct sp_serve *s, const struct sp_serve_options *opt, struct sp_config *config,
                sp_error_t *err)
{
  bool private_mounts;

  s->config = config;
  s->rules = sp_runtime_bundle_rules_for (config->runtime);
  private_mounts = !s->rules.workspaces_on_host;
  s->host_state_fd = s->host_mnt_ns_fd = -1;
  /* Before serve leaves the host's mount namespace: the seeds as the host
     sees them, to be told of what never propagates into serve's own (a
     remount read-write of a seed).  */
  if (private_mounts)
    {
      s->host_state_fd = open (opt->state, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (s->host_state_fd < 0)
        {
          sp_state_open_error (err, opt->state, errno);
          return sp_error_wrap (err, "--state");
        }
      s->host_mnt_ns_fd = open ("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
      if (s->host_mnt_ns_fd < 0)
        return sp_make_error (err, errno, "hold the host's mount namespace");
    }
  if (sp_serve_detach (private_mounts, err) < 0)
    return -1;
  if (sp_serve_preflight (s, opt, err) < 0)
    return -1;
  return sp_serve_canary (s, err);
}
