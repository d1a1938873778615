/* The invocation workspace: see workspace.h and docs/snapshot.md.  */
#define _GNU_SOURCE
#include "serve/workspace.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/mount.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/bounds.h"
#include "base/cleanup.h"
#include "base/quote.h"
#include "bundle/bundle.h"
#include "tree/remove.h"

#define UPPER_DIR "upper"
#define WORK_DIR  "work"

/* A busy unmount is retried this often, this far apart: a sandbox that has
   just exited may still hold the mount for a moment.  */
#define UMOUNT_TRIES    5
#define UMOUNT_PAUSE_NS (20 * 1000 * 1000)

/* Room for the overlay's options: three "/proc/self/fd/N" and the flags.  */
#define OVERLAY_OPTS_MAX 256

/* How many mounts stacked on one point remove_runs peels off.  */
#define STACKED_MOUNTS_MAX 8

const char *
sp_snapshot_mode_name (enum sp_snapshot_mode mode)
{
  switch (mode)
    {
    case SP_SNAPSHOT_OVERLAY:
      return "overlay";
    case SP_SNAPSHOT_COPY:
      return "copy";
    default:
      return "unknown";
    }
}

int
sp_snapshot_mode_parse (const char *name, enum sp_snapshot_mode *mode)
{
  if (name == NULL)
    return -1;
  if (strcmp (name, "overlay") == 0)
    *mode = SP_SNAPSHOT_OVERLAY;
  else if (strcmp (name, "copy") == 0)
    *mode = SP_SNAPSHOT_COPY;
  else
    return -1;
  return 0;
}

/* umount2 without flags, retried briefly while busy: never a lazy detach,
   which would report success while the mount lives on.  */
static int
umount_retry (const char *path)
{
  const struct timespec pause = { .tv_sec = 0, .tv_nsec = UMOUNT_PAUSE_NS };

  for (int i = 0;; i++)
    {
      if (umount2 (path, UMOUNT_NOFOLLOW) == 0)
        return 0;
      if (errno != EBUSY || i + 1 >= UMOUNT_TRIES)
        return -1;
      nanosleep (&pause, NULL);
    }
}

/* Whether parentfd/name is a file that is itself a mount (a bind of
   itself: the Docker backend's sealed script).  */
static int
is_file_mount (int parentfd, const char *name, bool *mounted)
{
  struct statx stx;

  *mounted = false;
  if (statx (parentfd, name, AT_SYMLINK_NOFOLLOW, STATX_TYPE, &stx) < 0)
    return errno == ENOENT ? 0 : -1;
  *mounted = S_ISREG (stx.stx_mode) && (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT)
             && (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
  return 0;
}

/* Whether parentfd/name is a directory with another file system on it.  */
static int
is_mount_point (int parentfd, const char *name, bool *mounted)
{
  struct stat parent, st;

  *mounted = false;
  if (fstat (parentfd, &parent) < 0)
    return -1;
  if (fstatat (parentfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return errno == ENOENT ? 0 : -1;
  *mounted = S_ISDIR (st.st_mode) && st.st_dev != parent.st_dev;
  return 0;
}

int
sp_workspace_create (int run_dirfd, const char *run_path, const char *name,
                     const struct sp_workspace_limits *limits, struct sp_workspace *ws, sp_error_t *err)
{
  cleanup_error sp_error_t undo_err = NULL;
  cleanup_close int path_fd = -1;
  struct stat run_st, path_st, created, mounted;
  char target[64];
  char opts[128];

  /* First, so that destroy is safe whatever happens below.  */
  *ws = (struct sp_workspace){ .run_dirfd = run_dirfd, .dirfd = -1, .bundle_dirfd = -1 };

  if (!sp_bundle_id_valid (name))
    return sp_make_error (err, 0, "workspace name must be 1 to %d of [a-z0-9-]", SP_ID_MAX_CHARS);
  if (run_path[0] != '/')
    return sp_make_error (err, 0, "workspace: the run path must be absolute");
  /* The path is what mount and umount see; it must name run_dirfd.  */
  if (fstat (run_dirfd, &run_st) < 0 || stat (run_path, &path_st) < 0)
    return sp_make_error (err, errno, "workspace: stat the run directory");
  if (run_st.st_dev != path_st.st_dev || run_st.st_ino != path_st.st_ino)
    return sp_make_error (err, 0, "workspace: the run path does not name the run directory");

  if (mkdirat (run_dirfd, name, 0700) < 0)
    return sp_make_error (err, errno, "workspace `%s`: mkdir", name);
  ws->name = strdup (name);
  if (ws->name == NULL)
    {
      unlinkat (run_dirfd, name, AT_REMOVEDIR);
      return sp_make_error (err, ENOMEM, "workspace `%s`", name);
    }
  if (asprintf (&ws->path, "%s/%s", run_path, name) < 0)
    {
      ws->path = NULL;
      goto fail_errno;
    }
  if (asprintf (&ws->bundle_path, "%s/%s", ws->path, SP_WORKSPACE_BUNDLE) < 0)
    {
      ws->bundle_path = NULL;
      goto fail_errno;
    }

  /* Mount through an O_PATH fd on the directory just made: the tmpfs lands
     on exactly that directory, whatever a path walk would find.  */
  path_fd = openat (run_dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (path_fd < 0 || fstat (path_fd, &created) < 0)
    goto fail_errno;
  snprintf (target, sizeof (target), "/proc/self/fd/%d", path_fd);
  snprintf (opts, sizeof (opts), "size=%" PRIu64 ",nr_inodes=%" PRIu64 ",mode=0711", limits->tmpfs_bytes,
            limits->tmpfs_inodes);
  ws->noexec = limits->noexec;
  if (mount ("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV | (ws->noexec ? MS_NOEXEC : 0), opts) < 0)
    {
      sp_make_error (err, errno, "workspace `%s`: mount the tmpfs", name);
      goto fail;
    }
  ws->tmpfs_mounted = true;
  /* The fd would keep the tmpfs busy at destroy.  */
  sp_closep (&path_fd);

  ws->dirfd = openat (run_dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (ws->dirfd < 0 || fstat (ws->dirfd, &mounted) < 0)
    goto fail_errno;
  if (mounted.st_dev == created.st_dev)
    {
      sp_make_error (err, 0, "workspace `%s`: the tmpfs is not where it was mounted", name);
      goto fail;
    }
  if (mkdirat (ws->dirfd, SP_WORKSPACE_BUNDLE, 0711) < 0)
    goto fail_errno;
  ws->bundle_dirfd = openat (ws->dirfd, SP_WORKSPACE_BUNDLE, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (ws->bundle_dirfd < 0)
    goto fail_errno;
  /* mkdir's mode passed through the umask; the bundle's is exact.  */
  if (fchmod (ws->bundle_dirfd, 0711) < 0)
    goto fail_errno;
  return 0;

fail_errno:
  sp_make_error (err, errno, "workspace `%s`: create", name);
fail:
  sp_closep (&path_fd);
  if (sp_workspace_destroy (ws, &undo_err) < 0)
    return sp_error_wrap (err, "(and undoing it failed: %s)", sp_error_message (undo_err));
  return -1;
}

static int
snapshot_copy (struct sp_workspace *ws, int seed_dirfd, const struct sp_copy_options *copy_limits,
               const struct sp_probe_identity *id, sp_error_t *err)
{
  struct sp_copy_options opts = *copy_limits;
  cleanup_close int repo_fd = -1;

  /* A probe's checkout is writable whatever the seed's modes are.  */
  opts.owner_writable = true;
  repo_fd = openat (ws->bundle_dirfd, SP_BUNDLE_REPO, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (repo_fd < 0)
    return sp_make_error (err, errno, "snapshot: open %s/%s", SP_WORKSPACE_BUNDLE, SP_BUNDLE_REPO);
  if (sp_tree_copy (seed_dirfd, repo_fd, &opts, id->host_probe_id, id->host_probe_id, err) < 0)
    return sp_error_wrap (err, "snapshot (copy)");
  return 0;
}

/* Makes dirfd/name (a fresh directory, root 0700) and returns an O_PATH fd
   on it.  */
static int
make_private_dir (int dirfd, const char *name, sp_error_t *err)
{
  int fd;

  if (mkdirat (dirfd, name, 0700) < 0)
    return sp_make_error (err, errno, "snapshot (overlay): mkdir %s", name);
  fd = openat (dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return sp_make_error (err, errno, "snapshot (overlay): open %s", name);
  return fd;
}

/* The seed as the probe sees it: a detached clone of its read-only mount,
   idmapped so that what is SP_PROBE_UID's on disk shows as the probe's host
   id, the owner of everything else in its snapshot.  The seed itself stays
   as staging sealed it.  */
static int
idmapped_seed (int seed_dirfd, const struct sp_probe_identity *id, sp_error_t *err)
{
  struct mount_attr attr = {
    .attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
    .userns_fd = (uint64_t)id->idmap_userns_fd,
  };
  cleanup_close int tree = -1;

  if (id->idmap_userns_fd < 0)
    return sp_make_error (err, 0, "snapshot (overlay): the probe identity has no idmap namespace");
  tree = (int)syscall (SYS_open_tree, seed_dirfd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
  if (tree < 0)
    return sp_make_error (err, errno, "snapshot (overlay): clone the seed's mount");
  if (syscall (SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &attr, sizeof (attr)) < 0)
    return sp_make_error (err, errno, "snapshot (overlay): idmap the seed for the probe");
  return get_and_reset_fd (&tree);
}

static int
snapshot_overlay (struct sp_workspace *ws, int seed_dirfd, const struct sp_probe_identity *id,
                  sp_error_t *err)
{
  cleanup_close int lower_fd = -1;
  cleanup_close int upper_fd = -1;
  cleanup_close int work_fd = -1;
  cleanup_close int repo_fd = -1;
  struct stat seed_st, bundle_st, repo_st;
  char opts[OVERLAY_OPTS_MAX];
  char target[64];
  int n;

  if (fstat (seed_dirfd, &seed_st) < 0)
    return sp_make_error (err, errno, "snapshot (overlay): stat the seed");
  if (!S_ISDIR (seed_st.st_mode))
    return sp_make_error (err, 0, "snapshot (overlay): the seed is not a directory");
  upper_fd = make_private_dir (ws->dirfd, UPPER_DIR, err);
  if (upper_fd < 0)
    return -1;
  work_fd = make_private_dir (ws->dirfd, WORK_DIR, err);
  if (work_fd < 0)
    return -1;
  /* The overlay's root takes its owner and mode from the upper directory,
     not from the lower: the probe's, with the seed's mode.  */
  if (fchown (upper_fd, id->host_probe_id, id->host_probe_id) < 0
      || fchmod (upper_fd, seed_st.st_mode & (S_IRWXU | S_IRWXG | S_IRWXO)) < 0)
    return sp_make_error (err, errno, "snapshot (overlay): give %s the probe's owner and the seed's mode",
                          UPPER_DIR);
  lower_fd = idmapped_seed (seed_dirfd, id, err);
  if (lower_fd < 0)
    return -1;

  repo_fd = openat (ws->bundle_dirfd, SP_BUNDLE_REPO, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (repo_fd < 0)
    return sp_make_error (err, errno, "snapshot (overlay): open %s/%s", SP_WORKSPACE_BUNDLE, SP_BUNDLE_REPO);
  if (fstat (ws->bundle_dirfd, &bundle_st) < 0 || fstat (repo_fd, &repo_st) < 0)
    return sp_make_error (err, errno, "snapshot (overlay): stat %s", SP_BUNDLE_REPO);
  if (repo_st.st_dev != bundle_st.st_dev)
    return sp_make_error (err, 0, "snapshot (overlay): %s is already a mount point", SP_BUNDLE_REPO);

  /* Every directory is named through this process's fds: the options, which
     any reader of mountinfo sees (the sandbox too), hold no host path, and
     no path is walked again.  index, metacopy and xino off: a plain copy-up
     overlay that keeps nothing outside upper and work.  redirect_dir=on, or
     renaming a seed directory fails with EXDEV where a copy would succeed;
     its xattr names a path inside the lower layer, in an upper layer only
     the proxy can give trusted.* xattrs to.  */
  n = snprintf (opts, sizeof (opts),
                "lowerdir=/proc/self/fd/%d,upperdir=/proc/self/fd/%d,workdir=/proc/self/fd/%d,"
                "index=off,metacopy=off,redirect_dir=on,xino=off",
                lower_fd, upper_fd, work_fd);
  if (n < 0 || (size_t)n >= sizeof (opts))
    return sp_make_error (err, 0, "snapshot (overlay): options too long");
  snprintf (target, sizeof (target), "/proc/self/fd/%d", repo_fd);
  if (mount ("overlay", target, "overlay", MS_NOSUID | MS_NODEV | (ws->noexec ? MS_NOEXEC : 0), opts) < 0)
    return sp_make_error (err, errno, "snapshot (overlay): mount");
  ws->overlay_mounted = true;
  return 0;
}

int
sp_workspace_snapshot (struct sp_workspace *ws, enum sp_snapshot_mode mode, int seed_dirfd,
                       const struct sp_copy_options *copy_limits, const struct sp_probe_identity *id,
                       sp_error_t *err)
{
  if (ws->dirfd < 0 || ws->bundle_dirfd < 0)
    return sp_make_error (err, 0, "snapshot: the workspace is not open");
  if (ws->overlay_mounted)
    return sp_make_error (err, 0, "snapshot: the workspace has a snapshot already");
  switch (mode)
    {
    case SP_SNAPSHOT_COPY:
      return snapshot_copy (ws, seed_dirfd, copy_limits, id, err);
    case SP_SNAPSHOT_OVERLAY:
      return snapshot_overlay (ws, seed_dirfd, id, err);
    default:
      return sp_make_error (err, 0, "snapshot: unknown mode");
    }
}

/* The failures of a destroy, one after another.  */
struct failures
{
  char text[1024];
  size_t len;
  int count;
};

static void
failed (struct failures *f, int errnum, const char *what)
{
  int n = snprintf (f->text + f->len, sizeof (f->text) - f->len, "%s%s (%s)", f->count > 0 ? "; " : "", what,
                    strerror (errnum));

  if (n > 0)
    f->len = f->len + (size_t)n < sizeof (f->text) ? f->len + (size_t)n : sizeof (f->text) - 1;
  f->count++;
}

/* Unmounts bundle/name, recording a failure as what.  */
static void
unmount_bundle_entry (const struct sp_workspace *ws, const char *name, const char *what, struct failures *f)
{
  cleanup_free char *path = NULL;

  if (asprintf (&path, "%s/%s", ws->bundle_path, name) < 0)
    {
      path = NULL;
      failed (f, ENOMEM, what);
    }
  else if (umount_retry (path) < 0)
    failed (f, errno, what);
}

int
sp_workspace_destroy (struct sp_workspace *ws, sp_error_t *err)
{
  struct failures f = { .len = 0, .count = 0 };
  bool tmp_mounted = false, script_mounted = false;

  /* The sandbox's /tmp, when the proxy mounted it (sp_bundle_mount_tmp).  */
  if (ws->bundle_dirfd >= 0 && is_mount_point (ws->bundle_dirfd, SP_BUNDLE_TMP, &tmp_mounted) == 0
      && tmp_mounted)
    unmount_bundle_entry (ws, SP_BUNDLE_TMP, "unmount the sandbox's /tmp", &f);
  /* The script, when the runtime sealed it (docker.c's seal_script).  */
  if (ws->bundle_dirfd >= 0 && is_file_mount (ws->bundle_dirfd, SP_BUNDLE_SCRIPT, &script_mounted) == 0
      && script_mounted)
    unmount_bundle_entry (ws, SP_BUNDLE_SCRIPT, "unmount the script's bind", &f);

  if (ws->overlay_mounted)
    {
      cleanup_free char *repo = NULL;

      if (asprintf (&repo, "%s/%s", ws->bundle_path, SP_BUNDLE_REPO) < 0)
        {
          repo = NULL;
          failed (&f, ENOMEM, "unmount the overlay");
        }
      else if (umount_retry (repo) < 0)
        failed (&f, errno, "unmount the overlay");
      else
        ws->overlay_mounted = false;
    }
  /* Our own fds on the tmpfs would keep it busy.  */
  sp_closep (&ws->bundle_dirfd);
  sp_closep (&ws->dirfd);
  if (ws->tmpfs_mounted)
    {
      if (umount_retry (ws->path) < 0)
        failed (&f, errno, "unmount the tmpfs");
      else
        ws->tmpfs_mounted = false;
    }
  /* Only once nothing is mounted: rmdir never reaches into a mount.  */
  if (ws->name != NULL && !ws->tmpfs_mounted && !ws->overlay_mounted)
    {
      if (unlinkat (ws->run_dirfd, ws->name, AT_REMOVEDIR) < 0 && errno != ENOENT)
        failed (&f, errno, "remove the directory");
    }

  if (f.count > 0)
    /* What is left stays recorded, so that a later destroy (or remove_runs)
       can finish the job.  */
    return sp_make_error (err, 0, "destroy workspace `%s`: %s", ws->name != NULL ? ws->name : "?", f.text);
  free (ws->name);
  free (ws->path);
  free (ws->bundle_path);
  ws->name = ws->path = ws->bundle_path = NULL;
  return 0;
}

/* Unmounts whatever is mounted on parentfd/name, stacked mounts too,
   adding to *count.  The path goes through /proc/self/fd/PARENT: the
   parent fd is not on the mount, so it does not keep it busy.  */
static int
unmount_all_at (int parentfd, const char *name, unsigned *count, sp_error_t *err)
{
  char path[PATH_MAX];
  char q[SP_QUOTE_BUF_SIZE];

  snprintf (path, sizeof (path), "/proc/self/fd/%d/%s", parentfd, name);
  for (int i = 0; i < STACKED_MOUNTS_MAX; i++)
    {
      bool mounted;

      if (is_mount_point (parentfd, name, &mounted) < 0)
        return sp_make_error (err, errno, "stat `%s`", sp_quote_name (name, q));
      if (!mounted)
        return 0;
      if (umount_retry (path) < 0)
        return sp_make_error (err, errno, "unmount `%s`", sp_quote_name (name, q));
      (*count)++;
    }
  return sp_make_error (err, 0, "unmount `%s`: more than %d mounts", sp_quote_name (name, q),
                        STACKED_MOUNTS_MAX);
}

/* A script left sealed by a crash (docker.c's seal_script).  */
static int
unmount_script (int bundle_fd, unsigned *count, sp_error_t *err)
{
  char path[PATH_MAX];

  for (int i = 0; i < STACKED_MOUNTS_MAX; i++)
    {
      bool mounted;

      if (is_file_mount (bundle_fd, SP_BUNDLE_SCRIPT, &mounted) < 0)
        return sp_make_error (err, errno, "stat `%s`", SP_BUNDLE_SCRIPT);
      if (!mounted)
        return 0;
      snprintf (path, sizeof (path), "/proc/self/fd/%d/%s", bundle_fd, SP_BUNDLE_SCRIPT);
      if (umount_retry (path) < 0)
        return sp_make_error (err, errno, "unmount `%s`", SP_BUNDLE_SCRIPT);
      (*count)++;
    }
  return sp_make_error (err, 0, "unmount `%s`: more than %d mounts", SP_BUNDLE_SCRIPT, STACKED_MOUNTS_MAX);
}

/* One orphaned invocation: the overlay on bundle/repo, the sandbox's /tmp on
   bundle/tmp and a sealed script, then the tmpfs; the unmounts are added to
   *mounts.  */
static int
remove_inv (int run_fd, const char *inv, unsigned *mounts, sp_error_t *err)
{
  char q[SP_QUOTE_BUF_SIZE];
  bool mounted;

  if (is_mount_point (run_fd, inv, &mounted) < 0)
    return sp_make_error (err, errno, "stat `%s`", sp_quote_name (inv, q));
  if (mounted)
    {
      cleanup_close int inv_fd = openat (run_fd, inv, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      cleanup_close int bundle_fd = -1;
      int ret;

      if (inv_fd < 0)
        return sp_make_error (err, errno, "open `%s`", sp_quote_name (inv, q));
      bundle_fd = openat (inv_fd, SP_WORKSPACE_BUNDLE, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (bundle_fd >= 0)
        {
          if (unmount_all_at (bundle_fd, SP_BUNDLE_REPO, mounts, err) < 0
              || unmount_all_at (bundle_fd, SP_BUNDLE_TMP, mounts, err) < 0
              || unmount_script (bundle_fd, mounts, err) < 0)
            return sp_error_wrap (err, "%s/%s", sp_quote_name (inv, q), SP_WORKSPACE_BUNDLE);
        }
      else if (errno != ENOENT && errno != ENOTDIR && errno != ELOOP)
        return sp_make_error (err, errno, "open `%s/%s`", sp_quote_name (inv, q), SP_WORKSPACE_BUNDLE);
      /* Our fds on the tmpfs would keep it busy.  */
      sp_closep (&bundle_fd);
      sp_closep (&inv_fd);
      ret = unmount_all_at (run_fd, inv, mounts, err);
      if (ret < 0)
        return ret;
    }
  return sp_tree_remove_at (run_fd, inv, err);
}

static int
remove_run (int work_dirfd, const char *run, struct sp_workspace_run_removed *done, sp_error_t *err)
{
  cleanup_close int run_fd = openat (work_dirfd, run, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  cleanup_dir DIR *dir = NULL;
  struct dirent *de;
  int dup_fd;

  if (run_fd < 0)
    return sp_make_error (err, errno, "open `%s`", run);
  dup_fd = openat (run_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dup_fd < 0)
    return sp_make_error (err, errno, "open `%s`", run);
  dir = fdopendir (dup_fd);
  if (dir == NULL)
    {
      close (dup_fd);
      return sp_make_error (err, errno, "open `%s`", run);
    }
  while ((errno = 0, de = readdir (dir)) != NULL)
    {
      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
        continue;
      if (remove_inv (run_fd, de->d_name, &done->mounts, err) < 0)
        return sp_error_wrap (err, "%s", run);
      done->entries++;
    }
  if (errno != 0)
    return sp_make_error (err, errno, "read `%s`", run);
  sp_closedirp (&dir);
  sp_closep (&run_fd);
  return sp_tree_remove_at (work_dirfd, run, err);
}

void
sp_workspace_removed_release (struct sp_workspace_removed *removed)
{
  if (removed == NULL)
    return;
  free (removed->runs);
  removed->runs = NULL;
  removed->n = 0;
}

/* Adds done to removed (when wanted); -1 when it cannot be.  */
static int
note_removed (struct sp_workspace_removed *removed, const struct sp_workspace_run_removed *done)
{
  struct sp_workspace_run_removed *grown;

  if (removed == NULL)
    return 0;
  grown = realloc (removed->runs, (removed->n + 1) * sizeof (*grown));
  if (grown == NULL)
    return -1;
  removed->runs = grown;
  removed->runs[removed->n++] = *done;
  return 0;
}

int
sp_workspace_remove_runs (int work_dirfd, const char *keep_run, struct sp_workspace_removed *removed,
                          sp_error_t *err)
{
  cleanup_dir DIR *dir = NULL;
  struct dirent *de;
  int dup_fd;
  int ret = 0;

  dup_fd = openat (work_dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dup_fd < 0)
    return sp_make_error (err, errno, "remove old runs: open the work directory");
  dir = fdopendir (dup_fd);
  if (dir == NULL)
    {
      close (dup_fd);
      return sp_make_error (err, errno, "remove old runs: open the work directory");
    }
  while ((errno = 0, de = readdir (dir)) != NULL)
    {
      struct sp_workspace_run_removed done = { .entries = 0 };
      struct stat st;
      int one;

      /* Only run directories are the proxy's: anything else is left.  */
      if (!sp_bundle_id_valid (de->d_name) || (keep_run != NULL && strcmp (de->d_name, keep_run) == 0))
        continue;
      if (fstatat (work_dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR (st.st_mode))
        continue;
      /* One run that fails does not stop the others; the first error is
         reported.  */
      snprintf (done.run, sizeof (done.run), "%.*s", SP_ID_MAX_CHARS, de->d_name);
      if (ret == 0)
        one = ret = remove_run (work_dirfd, de->d_name, &done, err);
      else
        {
          cleanup_error sp_error_t more = NULL;
          one = remove_run (work_dirfd, de->d_name, &done, &more);
        }
      if (one == 0 && note_removed (removed, &done) < 0 && ret == 0)
        ret = sp_make_error (err, ENOMEM, "remove old runs");
    }
  if (errno != 0 && ret == 0)
    return sp_make_error (err, errno, "remove old runs: read the work directory");
  if (ret < 0)
    return sp_error_wrap (err, "remove old runs");
  return 0;
}
