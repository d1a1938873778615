/* The runc backend: drives the runc CLI on the bundle (docs/runtimes.md).
   Every run of this proxy keeps its containers' state under its own --root,
   <state>/runc/<run>, so that orphan cleanup finds another run's leftovers
   by directory name alone.  After verify and prepare, the struct is only
   read: run and kill may be called from any thread.  */
#define _GNU_SOURCE
#include "backends.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sealed-probe/bounds.h>
#include <sealed-probe/bundle.h>
#include <sealed-probe/clock.h> /* SP_BUNDLE_CGROUP_PARENT only: the bundle library is not linked */
#include <sealed-probe/cgroup_stats.h>
#include <sealed-probe/cleanup.h>
#include <sealed-probe/dir_names.h>
#include <sealed-probe/fileio.h>
#include <sealed-probe/spawn.h>

#define RUNC_NAME               "runc"
#define RUNC_MIN_MAJOR          1
#define RUNC_MIN_MINOR          1
#define RUNC_MIN_PATCH          0
#define RUNC_VERSION_TIMEOUT_MS (10 * 1000)
/* runc kill, start and delete: each is given this long.  */
#define RUNC_COMMAND_TIMEOUT_MS (10 * 1000)
/* runc create: namespaces, mounts and cgroups, on a machine that may be busy.  */
#define RUNC_CREATE_TIMEOUT_MS (60 * 1000)
/* Orphan cgroups: how long their killed processes get to leave.  */
#define CGROUP_DRAIN_MS     2000
#define CGROUP_DRAIN_NAP_MS 10
#define CGROUP_PROCS_MAX    (256 * 1024)
/* "sp-" <run> "-" <invocation>.  */
#define CONTAINER_ID_MAX (3 + SP_ID_MAX_CHARS + 1 + SP_ID_MAX_CHARS)
/* A runc --root holds <id>/ with state.json and exec.fifo: shallow.  */
#define STATE_TREE_MAX_DEPTH 4

static char *const runc_env[] = { (char *)"PATH=" SP_RUNTIME_SEARCH_PATH, NULL };

struct runc
{
  struct sp_runtime_backend base;
  char *binary;    /* absolute; after verify, its realpath */
  char *state_dir; /* absolute */
  char *run_id;
  char *runc_dir; /* <state>/runc */
  char *root;     /* <state>/runc/<run>: runc's --root */
};

/* "sp-" then id characters: what runc is ever given as a container id, so
   that nothing starting with `-` reaches its argv.  */
static int
container_id_check (const char *id)
{
  size_t len = strlen (id);

  if (len < 4 || len > CONTAINER_ID_MAX || strncmp (id, "sp-", 3) != 0)
    return -1;
  for (size_t i = 3; i < len; i++)
    if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= '0' && id[i] <= '9') || id[i] == '-'))
      return -1;
  return 0;
}

static void
describe_status (int status, char *buf, size_t size)
{
  if (WIFEXITED (status))
    snprintf (buf, size, "exited with status %d", WEXITSTATUS (status));
  else if (WIFSIGNALED (status))
    snprintf (buf, size, "was killed by signal %d", WTERMSIG (status));
  else
    snprintf (buf, size, "ended with wait status 0x%x", (unsigned)status);
}

/* Runs one short runc command to completion within RUNC_COMMAND_TIMEOUT_MS;
   anything but exit 0 is an error naming what.  */
static int
runc_bounded (const char *binary, char *const argv[], const char *what, sp_error_t *err)
{
  struct sp_child child;
  int status = 0;
  int ret;
  char desc[64];

  if (sp_spawn (binary, argv, runc_env, &child, err) < 0)
    return sp_error_wrap (err, "%s", what);
  ret = sp_child_wait (&child, RUNC_COMMAND_TIMEOUT_MS, &status, err);
  if (ret <= 0)
    {
      sp_child_kill_and_reap (&child);
      if (ret < 0)
        return sp_error_wrap (err, "%s", what);
      return sp_make_error (err, 0, "%s: did not finish within %d s", what, RUNC_COMMAND_TIMEOUT_MS / 1000);
    }
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    {
      describe_status (status, desc, sizeof (desc));
      return sp_make_error (err, 0, "%s: `%s` %s", what, binary, desc);
    }
  return 0;
}

static int
runc_kill_id (const struct runc *r, const char *root, const char *id, sp_error_t *err)
{
  char what[64 + CONTAINER_ID_MAX];
  char *argv[]
      = { r->binary, (char *)"--root", (char *)root, (char *)"kill", (char *)id, (char *)"KILL", NULL };

  snprintf (what, sizeof (what), "runc kill `%s`", id);
  return runc_bounded (r->binary, argv, what, err);
}

static int
runc_delete_id (const struct runc *r, const char *root, const char *id, sp_error_t *err)
{
  char what[64 + CONTAINER_ID_MAX];
  char *argv[]
      = { r->binary, (char *)"--root", (char *)root, (char *)"delete", (char *)"--force", (char *)id, NULL };

  snprintf (what, sizeof (what), "runc delete `%s`", id);
  return runc_bounded (r->binary, argv, what, err);
}

/* Looks for runc in SP_RUNTIME_SEARCH_PATH: the first executable regular
   file.  */
static char *
find_in_search_path (void)
{
  const char *p = SP_RUNTIME_SEARCH_PATH;

  while (*p)
    {
      size_t n = strcspn (p, ":");
      char *candidate = NULL;
      struct stat st;

      if (asprintf (&candidate, "%.*s/%s", (int)n, p, RUNC_NAME) < 0)
        return NULL;
      if (stat (candidate, &st) == 0 && S_ISREG (st.st_mode) && access (candidate, X_OK) == 0)
        return candidate;
      free (candidate);
      p += n;
      if (*p == ':')
        p++;
    }
  errno = ENOENT;
  return NULL;
}

static void
runc_close (struct sp_runtime_backend *rt)
{
  struct runc *r = (struct runc *)rt;

  if (r == NULL)
    return;
  free (r->binary);
  free (r->state_dir);
  free (r->run_id);
  free (r->runc_dir);
  free (r->root);
  free (r);
}

/* Each directory from path's parent up to / must be root's (or the
   caller's) and not writable by group or others: else someone else could
   swap the binary.  */
static int
check_parents (const char *real, sp_error_t *err)
{
  char dir[PATH_MAX];
  char *slash;

  snprintf (dir, sizeof (dir), "%s", real);
  while ((slash = strrchr (dir, '/')) != NULL)
    {
      struct stat st;

      if (slash == dir)
        slash[1] = '\0';
      else
        *slash = '\0';
      if (stat (dir, &st) < 0)
        return sp_make_error (err, errno, "stat `%s`", dir);
      if (st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH)))
        return sp_make_error (
            err, 0, "runtime binary `%s`: directory `%s` is not root's or is writable by others", real, dir);
      if (slash == dir)
        break;
    }
  return 0;
}

/* "runc version X.Y.Z" and then anything that is not a digit (a `+ds1`
   suffix, `-rc.1`, the newline).  */
static int
parse_version (const char *out, unsigned v[3])
{
  const char *p;

  if (strncmp (out, "runc version ", 13) != 0)
    return -1;
  p = out + 13;
  for (int i = 0; i < 3; i++)
    {
      unsigned long n = 0;
      int digits = 0;

      while (*p >= '0' && *p <= '9' && digits < 6)
        {
          n = n * 10 + (unsigned long)(*p - '0');
          p++;
          digits++;
        }
      if (digits == 0 || (*p >= '0' && *p <= '9'))
        return -1;
      v[i] = (unsigned)n;
      if (i < 2)
        {
          if (*p != '.')
            return -1;
          p++;
        }
    }
  if (*p == '.')
    return -1;
  return 0;
}

static int
runc_verify (struct sp_runtime_backend *rt, sp_error_t *err)
{
  struct runc *r = (struct runc *)rt;
  cleanup_free char *real = realpath (r->binary, NULL);
  char out[SP_RUNTIME_VERSION_MAX_BYTES + 1];
  size_t len = 0;
  int status = 0;
  struct stat st;
  unsigned v[3];
  char desc[64];

  if (real == NULL)
    return sp_make_error (err, errno, "runtime binary `%s`", r->binary);
  if (stat (real, &st) < 0)
    return sp_make_error (err, errno, "runtime binary `%s`: stat", real);
  if (!S_ISREG (st.st_mode))
    return sp_make_error (err, 0, "runtime binary `%s`: not a regular file", real);
  if (st.st_uid != 0)
    return sp_make_error (err, 0, "runtime binary `%s`: not owned by root", real);
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return sp_make_error (err, 0, "runtime binary `%s`: writable by group or others", real);
  if (!(st.st_mode & S_IXUSR))
    return sp_make_error (err, 0, "runtime binary `%s`: not executable", real);
  if (check_parents (real, err) < 0)
    return -1;

  char *argv[] = { real, (char *)"--version", NULL };
  if (sp_spawn_capture (real, argv, runc_env, RUNC_VERSION_TIMEOUT_MS, out, SP_RUNTIME_VERSION_MAX_BYTES,
                        &len, &status, err)
      < 0)
    return sp_error_wrap (err, "runtime binary `%s`: --version", real);
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    {
      describe_status (status, desc, sizeof (desc));
      return sp_make_error (err, 0, "runtime binary `%s`: --version %s", real, desc);
    }
  if (strlen (out) != len || parse_version (out, v) < 0)
    {
      size_t shown = strcspn (out, "\n");
      for (size_t i = 0; i < shown; i++)
        if ((unsigned char)out[i] < 0x20 || (unsigned char)out[i] >= 0x7f)
          out[i] = '?';
      return sp_make_error (err, 0, "runtime binary `%s`: --version printed `%.*s`, not `runc version X.Y.Z`",
                            real, (int)(shown > 80 ? 80 : shown), out);
    }
  /* Each part has at most 6 digits (parse_version).  */
  if ((uint64_t)v[0] * 1000000000000ULL + (uint64_t)v[1] * 1000000ULL + v[2]
      < (uint64_t)RUNC_MIN_MAJOR * 1000000000000ULL + (uint64_t)RUNC_MIN_MINOR * 1000000ULL + RUNC_MIN_PATCH)
    return sp_make_error (err, 0, "runtime binary `%s`: runc %u.%u.%u is older than the %d.%d.%d this needs",
                          real, v[0], v[1], v[2], RUNC_MIN_MAJOR, RUNC_MIN_MINOR, RUNC_MIN_PATCH);
  /* Every later exec runs the file that was checked.  */
  free (r->binary);
  r->binary = get_and_reset (&real);
  return 0;
}

/* mkdir name below dirfd (0700, EEXIST is fine), then opens it refusing a
   symlink, and insists on a directory of ours that nobody else can enter.  */
static int
make_private_dir (int dirfd, const char *name, const char *shown, sp_error_t *err)
{
  cleanup_close int fd = -1;
  struct stat st;

  if (mkdirat (dirfd, name, 0700) < 0 && errno != EEXIST)
    return sp_make_error (err, errno, "mkdir `%s`", shown);
  fd = openat (dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return sp_make_error (err, errno, "open `%s`", shown);
  if (fstat (fd, &st) < 0)
    return sp_make_error (err, errno, "stat `%s`", shown);
  if (st.st_uid != geteuid ())
    return sp_make_error (err, 0, "`%s` is not owned by uid %d", shown, (int)geteuid ());
  if ((st.st_mode & 07777) != 0700 && fchmod (fd, 0700) < 0)
    return sp_make_error (err, errno, "chmod `%s`", shown);
  return get_and_reset_fd (&fd);
}

static int
runc_prepare (struct sp_runtime_backend *rt, sp_error_t *err)
{
  struct runc *r = (struct runc *)rt;
  cleanup_close int state_fd = open (r->state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  cleanup_close int runc_fd = -1;
  cleanup_close int run_fd = -1;

  if (state_fd < 0)
    return sp_make_error (err, errno, "open state directory `%s`", r->state_dir);
  runc_fd = make_private_dir (state_fd, RUNC_NAME, r->runc_dir, err);
  if (runc_fd < 0)
    return -1;
  run_fd = make_private_dir (runc_fd, r->run_id, r->root, err);
  if (run_fd < 0)
    return -1;
  /* `runc create` exits and leaves the container's init behind: as the
     subreaper, this process inherits it, and so can wait for it and read
     the probe's own exit status.  */
  if (prctl (PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
    return sp_make_error (err, errno, "become the subreaper of the containers' inits");
  return 0;
}

/* Reads the pid `runc create --pid-file` wrote, and takes hold of the
   container's init: a child of this process (its subreaper), waiting on
   runc's exec fifo.  */
static int
init_open (const char *pid_file, struct sp_child *init, sp_error_t *err)
{
  cleanup_close int fd = open (pid_file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  char text[32];
  ssize_t n;
  long pid;

  if (fd < 0)
    return sp_make_error (err, errno, "read the pid file `%s`", pid_file);
  n = read (fd, text, sizeof (text) - 1);
  if (n <= 0)
    return sp_make_error (err, n < 0 ? errno : 0, "read the pid file `%s`", pid_file);
  text[n] = '\0';
  pid = strtol (text, NULL, 10);
  if (pid <= 1 || pid > INT32_MAX)
    return sp_make_error (err, 0, "the pid file `%s` holds no pid", pid_file);
  if (sp_child_adopt ((pid_t)pid, init, err) < 0)
    return sp_error_wrap (err, "the container's init");
  return 0;
}

/* Runs `runc create`, bounded.  */
static int
runc_create (const struct runc *r, const struct sp_runtime_job *job, const char *pid_file,
             struct sp_run_facts *facts, sp_error_t *err)
{
  char *argv[] = { r->binary,
                   (char *)"--root",
                   r->root,
                   (char *)"create",
                   (char *)"--bundle",
                   (char *)job->bundle_dir,
                   (char *)"--pid-file",
                   (char *)pid_file,
                   (char *)job->container_id,
                   NULL };
  struct sp_child child;
  char desc[64];
  int status = 0;
  int ret;

  if (sp_spawn (r->binary, argv, runc_env, &child, err) < 0)
    return sp_error_wrap (err, "runc create `%s`", job->container_id);
  facts->launched = true;
  facts->stage = SP_RUN_STAGE_CREATE;
  ret = sp_child_wait (&child, RUNC_CREATE_TIMEOUT_MS, &status, err);
  if (ret <= 0)
    {
      sp_child_kill_and_reap (&child);
      if (ret < 0)
        return sp_error_wrap (err, "runc create `%s`", job->container_id);
      return sp_make_error (err, 0, "runc create `%s`: did not finish within %d s", job->container_id,
                            RUNC_CREATE_TIMEOUT_MS / 1000);
    }
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    {
      describe_status (status, desc, sizeof (desc));
      return sp_make_error (err, 0, "runc create `%s`: `%s` %s", job->container_id, r->binary, desc);
    }
  return 0;
}

static int
runc_run (struct sp_runtime_backend *rt, const struct sp_runtime_job *job, struct sp_run_facts *facts,
          sp_error_t *err)
{
  struct runc *r = (struct runc *)rt;
  struct sp_cgroup_stats stats;
  cleanup_error sp_error_t ignored = NULL;
  cleanup_close int root_fd = -1;
  cleanup_free char *pid_file = NULL;
  struct sp_child init = { .pid = -1, .pidfd = -1 };
  char what[64 + CONTAINER_ID_MAX];
  uint64_t start;
  int status = 0;
  int ret;

  memset (facts, 0, sizeof (*facts));
  facts->exit_code = -1;
  if (job == NULL || job->bundle_dir == NULL || job->bundle_dir[0] != '/')
    return sp_make_error (err, 0, "runc run: the bundle directory must be an absolute path");
  if (job->container_id == NULL || container_id_check (job->container_id) < 0)
    return sp_make_error (err, 0, "runc run: bad container id");
  if (job->timeout_seconds == 0 || job->timeout_seconds > SP_TIMEOUT_MAX_SECONDS)
    return sp_make_error (err, 0, "runc run: timeout must be 1 to %d s", SP_TIMEOUT_MAX_SECONDS);
  if (asprintf (&pid_file, "%s/%s.pid", r->root, job->container_id) < 0)
    {
      pid_file = NULL;
      return sp_make_error (err, ENOMEM, "allocate");
    }

  /* `runc create` returns once the container exists and its init waits to
     exec the probe; `runc start` releases it.  A failure up to there is
     runc's (or the host's), never the probe's: runc run's exit status could
     not tell the two apart (docs/runtimes.md).  */
  if (runc_create (r, job, pid_file, facts, err) < 0)
    {
      if (facts->stage == SP_RUN_STAGE_NONE)
        return -1; /* runc never ran: nothing to remove */
      goto cleanup;
    }
  if (init_open (pid_file, &init, err) < 0)
    goto cleanup;
  start = sp_monotonic_ns ();
  snprintf (what, sizeof (what), "runc start `%s`", job->container_id);
  {
    char *argv[] = { r->binary, (char *)"--root", r->root, (char *)"start", (char *)job->container_id, NULL };
    if (runc_bounded (r->binary, argv, what, err) < 0)
      {
        sp_child_kill_and_reap (&init);
        goto cleanup;
      }
  }
  facts->stage = SP_RUN_STAGE_PROBE;

  /* The probe runs as the init itself: its wait status is the probe's own,
     death by a signal included.  */
  ret = sp_child_wait (&init, (int)job->timeout_seconds * 1000, &status, err);
  if (ret == 0)
    {
      facts->timed_out = true;
      /* A failed kill is not final: the grace wait and a direct kill follow.  */
      runc_kill_id (r, r->root, job->container_id, &ignored);
      sp_error_release (&ignored);
      if (sp_child_wait (&init, SP_SERVE_KILL_GRACE_SECONDS * 1000, &status, &ignored) != 1)
        sp_child_kill_and_reap (&init);
      sp_error_release (&ignored);
    }
  else if (ret < 0)
    {
      sp_error_wrap (err, "runc `%s`", job->container_id);
      sp_child_kill_and_reap (&init);
    }
  facts->wall_ns = sp_monotonic_ns () - start;
  if (facts->timed_out)
    facts->signal = SIGKILL;
  else if (ret == 1 && WIFEXITED (status))
    facts->exit_code = WEXITSTATUS (status);
  else if (ret == 1 && WIFSIGNALED (status))
    facts->signal = WTERMSIG (status);

  /* Statistics are for the audit log only: a failure to read them leaves 0s
     and does not fail the run.  */
  if (job->cgroup_path && sp_cgroup_stats_read (job->cgroup_path, &stats, &ignored) == 0)
    {
      facts->peak_memory_bytes = stats.peak_memory_bytes;
      facts->cpu_ns = stats.cpu_ns;
      facts->oom = stats.oom_kills > 0;
    }
  sp_error_release (&ignored);

cleanup:
  sp_child_kill_and_reap (&init);
  unlink (pid_file);
  if (runc_delete_id (r, r->root, job->container_id, *err ? &ignored : err) < 0)
    return -1;
  root_fd = open (r->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root_fd < 0)
    return *err ? -1 : sp_make_error (err, errno, "open `%s`", r->root);
  struct stat st;
  if (fstatat (root_fd, job->container_id, &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT)
    return *err ? -1
                : sp_make_error (err, 0, "runc delete `%s`: its state is still in `%s`", job->container_id,
                                 r->root);
  return *err ? -1 : 0;
}

static int
runc_kill (struct sp_runtime_backend *rt, const char *container_id, sp_error_t *err)
{
  struct runc *r = (struct runc *)rt;

  if (container_id == NULL || container_id_check (container_id) < 0)
    return sp_make_error (err, 0, "runc kill: bad container id");
  return runc_kill_id (r, r->root, container_id, err);
}

/* Removes name below dirfd and everything in it, never following a link.  */
static int
remove_tree_at (int dirfd, const char *name, int depth)
{
  cleanup_close int fd = -1;
  cleanup_dir_names struct sp_dir_names names = { 0 };
  cleanup_error sp_error_t ignored = NULL;

  if (unlinkat (dirfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
    return 0;
  if (errno == ENOTDIR)
    return unlinkat (dirfd, name, 0);
  if (errno != ENOTEMPTY && errno != EEXIST)
    return -1;
  if (depth <= 0)
    {
      errno = ENOTEMPTY;
      return -1;
    }
  fd = openat (dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return -1;
  if (sp_dir_names_read (fd, &names, &ignored) < 0)
    {
      errno = ignored && ignored->status ? ignored->status : EIO;
      return -1;
    }
  for (size_t i = 0; i < names.len; i++)
    if (remove_tree_at (fd, names.v[i], depth - 1) < 0)
      return -1;
  return unlinkat (dirfd, name, AT_REMOVEDIR);
}

/* Keeps the first error and drops the rest, so that cleanup goes on.  */
static void
keep_first (sp_error_t *first, sp_error_t *e)
{
  if (*first == NULL)
    *first = *e;
  else
    sp_error_release (e);
  *e = NULL;
}

struct run_list
{
  char **v;
  size_t len;
};

static void
run_list_release (struct run_list *l)
{
  for (size_t i = 0; i < l->len; i++)
    free (l->v[i]);
  free (l->v);
  l->v = NULL;
  l->len = 0;
}

static int
run_list_add (struct run_list *l, const char *id)
{
  char **grown = realloc (l->v, (l->len + 1) * sizeof (*l->v));

  if (grown == NULL)
    return -1;
  l->v = grown;
  if ((l->v[l->len] = strdup (id)) == NULL)
    return -1;
  l->len++;
  return 0;
}

static bool
has_run_prefix (const char *name, const char *run)
{
  size_t n = strlen (run);

  return strncmp (name, run, n) == 0 && name[n] == '-' && sp_bundle_id_valid (name + n + 1);
}

/* A cgroup "<run>-<invocation>" is cleaned when <run> is one being cleaned.
   Run ids may hold `-`, so "a-b-1" fits run "a" and run "a-b": when one of
   the readings is the current run and it is spared, the cgroup is spared.  */
static bool
cgroup_is_orphan (const struct runc *r, const struct run_list *runs, bool include_current, const char *name)
{
  if (!include_current && has_run_prefix (name, r->run_id))
    return false;
  for (size_t i = 0; i < runs->len; i++)
    if (has_run_prefix (name, runs->v[i]))
      return true;
  return false;
}

/* Deletes the containers under one --root (<state>/runc/<run>), then the
   root itself.  */
static int
clean_runc_root (struct runc *r, int runc_fd, const char *run, sp_error_t *err)
{
  cleanup_close int run_fd = openat (runc_fd, run, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  cleanup_dir_names struct sp_dir_names names = { 0 };
  cleanup_free char *root = NULL;
  cleanup_error sp_error_t first = NULL;
  cleanup_error sp_error_t e = NULL;

  if (run_fd < 0)
    return errno == ENOENT ? 0 : sp_make_error (err, errno, "open `%s/%s`", r->runc_dir, run);
  if (asprintf (&root, "%s/%s", r->runc_dir, run) < 0)
    return sp_make_error (err, errno, "allocate");
  if (sp_dir_names_read (run_fd, &names, err) < 0)
    return sp_error_wrap (err, "list `%s`", root);
  for (size_t i = 0; i < names.len; i++)
    if (container_id_check (names.v[i]) == 0 && runc_delete_id (r, root, names.v[i], &e) < 0)
      keep_first (&first, &e);
  if (first)
    {
      *err = get_and_reset (&first);
      return -1;
    }
  if (remove_tree_at (runc_fd, run, STATE_TREE_MAX_DEPTH) < 0)
    return sp_make_error (err, errno, "remove `%s`", root);
  return 0;
}

static int
kill_cgroup_procs (int cg_fd)
{
  cleanup_close int fd = openat (cg_fd, "cgroup.procs", O_RDONLY | O_CLOEXEC);
  cleanup_free char *buf = NULL;
  cleanup_error sp_error_t e = NULL;
  size_t len = 0;
  int found = 0;

  if (fd < 0)
    return errno == ENOENT ? 0 : -1;
  if (sp_read_fd_capped (fd, CGROUP_PROCS_MAX, &buf, &len, &e) < 0)
    return -1;
  for (char *p = buf; *p;)
    {
      char *end;
      long pid = strtol (p, &end, 10);

      if (end == p)
        break;
      if (pid > 0)
        {
          kill ((pid_t)pid, SIGKILL);
          found++;
        }
      p = end;
      while (*p == '\n')
        p++;
    }
  return found;
}

/* Kills what is left in one orphan cgroup, waits briefly for it to empty,
   and removes it.  */
static int
clean_cgroup (int parent_fd, const char *hier, const char *name, sp_error_t *err)
{
  cleanup_close int cg_fd = openat (parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  int waited = 0;

  if (cg_fd < 0)
    return errno == ENOENT ? 0 : sp_make_error (err, errno, "open cgroup `%s/%s`", hier, name);
  /* A frozen cgroup's processes cannot die until thawed (v1 freezer).  */
  {
    cleanup_close int fz = openat (cg_fd, "freezer.state", O_WRONLY | O_CLOEXEC);
    if (fz >= 0 && write (fz, "THAWED", 6) < 0)
      {
        /* the kill below reports what is left */
      }
  }
  while (kill_cgroup_procs (cg_fd) > 0 && waited < CGROUP_DRAIN_MS)
    {
      struct timespec nap = { 0, CGROUP_DRAIN_NAP_MS * 1000000L };
      nanosleep (&nap, NULL);
      waited += CGROUP_DRAIN_NAP_MS;
    }
  for (;;)
    {
      if (unlinkat (parent_fd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
        return 0;
      if (errno != EBUSY || waited >= CGROUP_DRAIN_MS)
        return sp_make_error (err, errno, "remove cgroup `%s/%s`", hier, name);
      struct timespec nap = { 0, CGROUP_DRAIN_NAP_MS * 1000000L };
      nanosleep (&nap, NULL);
      waited += CGROUP_DRAIN_NAP_MS;
    }
}

static int
clean_hierarchy (const struct runc *r, int hier_fd, const char *hier, const struct run_list *runs,
                 bool include_current, sp_error_t *err)
{
  cleanup_close int parent_fd
      = openat (hier_fd, SP_BUNDLE_CGROUP_PARENT, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  cleanup_dir_names struct sp_dir_names names = { 0 };
  cleanup_error sp_error_t first = NULL;
  cleanup_error sp_error_t e = NULL;

  if (parent_fd < 0)
    return errno == ENOENT ? 0 : sp_make_error (err, errno, "open `%s/%s`", hier, SP_BUNDLE_CGROUP_PARENT);
  if (sp_dir_names_read (parent_fd, &names, err) < 0)
    return sp_error_wrap (err, "list `%s/%s`", hier, SP_BUNDLE_CGROUP_PARENT);
  for (size_t i = 0; i < names.len; i++)
    {
      struct stat st;

      if (fstatat (parent_fd, names.v[i], &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR (st.st_mode))
        continue;
      if (!cgroup_is_orphan (r, runs, include_current, names.v[i]))
        continue;
      if (clean_cgroup (parent_fd, hier, names.v[i], &e) < 0)
        keep_first (&first, &e);
    }
  /* The shared parent stays, empty, as runc leaves it: another proxy's runc
     may be creating its sandbox's cgroup in it at this very moment, and
     removing the parent then would fail that sandbox.  */
  if (first)
    {
      *err = get_and_reset (&first);
      return -1;
    }
  return 0;
}

static int
clean_cgroups (const struct runc *r, const struct run_list *runs, bool include_current, sp_error_t *err)
{
  cleanup_close int root_fd = open (SP_CGROUP_ROOT, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  cleanup_dir_names struct sp_dir_names names = { 0 };
  cleanup_error sp_error_t first = NULL;
  cleanup_error sp_error_t e = NULL;
  struct stat st;

  if (root_fd < 0)
    return sp_make_error (err, errno, "open `%s`", SP_CGROUP_ROOT);
  if (fstatat (root_fd, "cgroup.controllers", &st, AT_SYMLINK_NOFOLLOW) == 0)
    return clean_hierarchy (r, root_fd, SP_CGROUP_ROOT, runs, include_current, err);
  if (sp_dir_names_read (root_fd, &names, err) < 0)
    return sp_error_wrap (err, "list `%s`", SP_CGROUP_ROOT);
  for (size_t i = 0; i < names.len; i++)
    {
      cleanup_close int hier_fd = -1;
      char hier[PATH_MAX];

      /* A symlink (cpu -> cpu,cpuacct) is visited under its real name.  */
      if (fstatat (root_fd, names.v[i], &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR (st.st_mode))
        continue;
      hier_fd = openat (root_fd, names.v[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (hier_fd < 0)
        continue;
      snprintf (hier, sizeof (hier), "%s/%s", SP_CGROUP_ROOT, names.v[i]);
      if (clean_hierarchy (r, hier_fd, hier, runs, include_current, &e) < 0)
        keep_first (&first, &e);
    }
  if (first)
    {
      *err = get_and_reset (&first);
      return -1;
    }
  return 0;
}

static int
runc_cleanup_orphans (struct sp_runtime_backend *rt, bool include_current, sp_error_t *err)
{
  struct runc *r = (struct runc *)rt;
  struct run_list runs __attribute__ ((cleanup (run_list_release))) = { 0 };
  cleanup_close int runc_fd = open (r->runc_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  cleanup_dir_names struct sp_dir_names names = { 0 };
  cleanup_error sp_error_t first = NULL;
  cleanup_error sp_error_t e = NULL;

  if (runc_fd < 0 && errno != ENOENT)
    return sp_make_error (err, errno, "open `%s`", r->runc_dir);
  if (runc_fd >= 0 && sp_dir_names_read (runc_fd, &names, err) < 0)
    return sp_error_wrap (err, "list `%s`", r->runc_dir);
  for (size_t i = 0; i < names.len; i++)
    {
      if (!sp_bundle_id_valid (names.v[i]))
        continue;
      if (!include_current && strcmp (names.v[i], r->run_id) == 0)
        continue;
      if (run_list_add (&runs, names.v[i]) < 0)
        return sp_make_error (err, errno, "allocate");
      if (clean_runc_root (r, runc_fd, names.v[i], &e) < 0)
        keep_first (&first, &e);
    }
  /* The current run's cgroups go too, even when its root is already gone.  */
  if (include_current && runc_fd < 0 && run_list_add (&runs, r->run_id) < 0)
    return sp_make_error (err, errno, "allocate");
  if (include_current && runc_fd >= 0)
    {
      bool listed = false;
      for (size_t i = 0; i < runs.len; i++)
        listed = listed || strcmp (runs.v[i], r->run_id) == 0;
      if (!listed && run_list_add (&runs, r->run_id) < 0)
        return sp_make_error (err, errno, "allocate");
    }
  if (runs.len > 0 && clean_cgroups (r, &runs, include_current, &e) < 0)
    keep_first (&first, &e);
  if (first)
    {
      *err = get_and_reset (&first);
      return sp_error_wrap (err, "clean up orphans");
    }
  return 0;
}

static const struct sp_runtime_ops runc_ops = {
  .name = "runc",
  .verify = runc_verify,
  .prepare = runc_prepare,
  .run = runc_run,
  .kill = runc_kill,
  .cleanup_orphans = runc_cleanup_orphans,
  .close = runc_close,
};

int
sp_runc_open (const struct sp_runtime_settings *settings, struct sp_runtime_backend **out, sp_error_t *err)
{
  struct runc *r = NULL;

  *out = NULL;
  if (settings == NULL || settings->state_dir == NULL || settings->state_dir[0] != '/')
    return sp_make_error (err, 0, "runc: the state directory must be an absolute path");
  if (settings->run_id == NULL || !sp_bundle_id_valid (settings->run_id))
    return sp_make_error (err, 0, "runc: run id must be 1 to %d characters of a-z, 0-9 and -",
                          SP_ID_MAX_CHARS);
  if (settings->binary && settings->binary[0] != '/')
    return sp_make_error (err, 0, "runc: the binary `%s` must be an absolute path", settings->binary);

  r = calloc (1, sizeof (*r));
  if (r == NULL)
    return sp_make_error (err, errno, "allocate");
  r->base.ops = &runc_ops;
  r->binary = settings->binary ? strdup (settings->binary) : find_in_search_path ();
  if (r->binary == NULL)
    {
      int e = errno;
      runc_close (&r->base);
      return sp_make_error (err, e, "runc: no `%s` in %s", RUNC_NAME, SP_RUNTIME_SEARCH_PATH);
    }
  r->state_dir = strdup (settings->state_dir);
  r->run_id = strdup (settings->run_id);
  if (r->state_dir == NULL || r->run_id == NULL
      || asprintf (&r->runc_dir, "%s/%s", r->state_dir, RUNC_NAME) < 0)
    {
      r->runc_dir = NULL; /* undefined after a failed asprintf */
      runc_close (&r->base);
      return sp_make_error (err, ENOMEM, "allocate");
    }
  if (asprintf (&r->root, "%s/%s", r->runc_dir, r->run_id) < 0)
    {
      r->root = NULL;
      runc_close (&r->base);
      return sp_make_error (err, ENOMEM, "allocate");
    }
  *out = &r->base;
  return 0;
}
