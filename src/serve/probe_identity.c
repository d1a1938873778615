/* The probe's host identity: see src/serve/probe_identity.h.  */
#define _GNU_SOURCE
#include "serve/probe_identity.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/bounds.h"
#include "base/cleanup.h"
#include "bundle/bundle.h"
#include "os/fileio.h"

static int
write_map (pid_t pid, const char *which, uint32_t host_id, sp_error_t *err)
{
  char path[64], map[64];
  cleanup_close int fd = -1;
  int len;

  snprintf (path, sizeof (path), "/proc/%d/%s", (int)pid, which);
  len = snprintf (map, sizeof (map), "%d %" PRIu32 " 1\n", SP_PROBE_UID, host_id);
  fd = open (path, O_WRONLY | O_CLOEXEC);
  if (fd < 0 || write (fd, map, (size_t)len) != len)
    return sp_make_error (err, errno, "write the idmap namespace's %s", which);
  return 0;
}

/* An exclusive flock on lock_dirfd/<id>, kept as long as the fd is open.
   The holder removes the file when it lets go (lock_release), so a lock is
   taken only when, once held, the path still names the locked file: a taker
   that opened the file just before its holder removed it retries on the new
   one instead of sharing the id.  */
static int
lock_id (int lock_dirfd, uint32_t host_id, sp_error_t *err)
{
  char name[16];

  snprintf (name, sizeof (name), "%" PRIu32, host_id);
  for (int attempt = 0; attempt < 8; attempt++)
    {
      cleanup_close int fd = openat (lock_dirfd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
      struct stat held, named;

      if (fd < 0)
        return sp_make_error (err, errno, "lock host id %" PRIu32, host_id);
      if (flock (fd, LOCK_EX | LOCK_NB) < 0)
        return errno == EWOULDBLOCK ? sp_make_error (
                   err, 0, "host id %" PRIu32 " is another proxy's (give each its own --probe-ids)", host_id)
                                    : sp_make_error (err, errno, "lock host id %" PRIu32, host_id);
      if (fstat (fd, &held) == 0 && fstatat (lock_dirfd, name, &named, AT_SYMLINK_NOFOLLOW) == 0
          && held.st_dev == named.st_dev && held.st_ino == named.st_ino)
        return get_and_reset_fd (&fd);
    }
  return sp_make_error (err, 0, "lock host id %" PRIu32 ": its lock file keeps changing", host_id);
}

/* Removes the lock file while still holding its lock, then lets go.  */
static void
lock_release (int lock_dirfd, uint32_t host_id, int *fd)
{
  char name[16];

  if (*fd < 0)
    return;
  snprintf (name, sizeof (name), "%" PRIu32, host_id);
  if (lock_dirfd >= 0)
    unlinkat (lock_dirfd, name, 0);
  sp_closep (fd);
}

int
sp_probe_identity_make (uint32_t base, unsigned slot, int lock_dirfd, struct sp_probe_identity *id,
                        sp_error_t *err)
{
  cleanup_close int ready_r = -1;
  cleanup_close int ready_w = -1;
  char path[64];
  char c = 0;
  int sync[2];
  pid_t pid;
  int ret = -1;

  sp_bundle_slot_ids (base, slot, &id->host_root_id, &id->host_probe_id);
  id->idmap_userns_fd = id->root_lock_fd = id->probe_lock_fd = -1;
  id->lock_dirfd = fcntl (lock_dirfd, F_DUPFD_CLOEXEC, 0);
  if (id->lock_dirfd < 0)
    return sp_make_error (err, errno, "lock the probe ids");
  id->root_lock_fd = lock_id (lock_dirfd, id->host_root_id, err);
  if (id->root_lock_fd < 0)
    return -1;
  id->probe_lock_fd = lock_id (lock_dirfd, id->host_probe_id, err);
  if (id->probe_lock_fd < 0)
    return -1;
  if (pipe2 (sync, O_CLOEXEC) < 0)
    return sp_make_error (err, errno, "idmap namespace: pipe");
  ready_r = sync[0];
  ready_w = sync[1];
  pid = fork ();
  if (pid < 0)
    return sp_make_error (err, errno, "idmap namespace: fork");
  if (pid == 0)
    {
      /* Only async-signal-safe calls here: the parent may have threads.  */
      c = unshare (CLONE_NEWUSER) == 0 ? 'y' : 'n';
      (void)!write (ready_w, &c, 1);
      for (;;)
        pause ();
    }
  sp_closep (&ready_w);
  if (TEMP_FAILURE_RETRY (read (ready_r, &c, 1)) != 1 || c != 'y')
    sp_make_error (err, 0, "idmap namespace: the child could not make a user namespace");
  else if (write_map (pid, "uid_map", id->host_probe_id, err) == 0
           && write_map (pid, "gid_map", id->host_probe_id, err) == 0)
    {
      snprintf (path, sizeof (path), "/proc/%d/ns/user", (int)pid);
      id->idmap_userns_fd = open (path, O_RDONLY | O_CLOEXEC);
      if (id->idmap_userns_fd < 0)
        sp_make_error (err, errno, "idmap namespace: open");
      else
        ret = 0;
    }
  kill (pid, SIGKILL);
  TEMP_FAILURE_RETRY (waitpid (pid, NULL, 0));
  return ret;
}

void
sp_probe_identity_release (struct sp_probe_identity *id)
{
  sp_closep (&id->idmap_userns_fd);
  lock_release (id->lock_dirfd, id->host_root_id, &id->root_lock_fd);
  lock_release (id->lock_dirfd, id->host_probe_id, &id->probe_lock_fd);
  sp_closep (&id->lock_dirfd);
}

/* name as a host id: decimal digits only, within uint32_t.  */
static bool
id_name (const char *name, uint32_t *id)
{
  unsigned long long v = 0;
  size_t i;

  for (i = 0; name[i] >= '0' && name[i] <= '9' && i < 10; i++)
    v = v * 10 + (unsigned)(name[i] - '0');
  if (i == 0 || name[i] != '\0' || v > UINT32_MAX)
    return false;
  *id = (uint32_t)v;
  return true;
}

/* Removes lock_dirfd/name if nobody holds it: 1 when removed, 0 when held
   or gone meanwhile, -1 on an error.  */
static int
sweep_one (int lock_dirfd, const char *name)
{
  cleanup_close int fd = openat (lock_dirfd, name, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  struct stat held, named;

  if (fd < 0)
    return errno == ENOENT ? 0 : -1;
  if (flock (fd, LOCK_EX | LOCK_NB) < 0)
    return errno == EWOULDBLOCK ? 0 : -1;
  if (fstat (fd, &held) < 0 || !S_ISREG (held.st_mode))
    return 0;
  /* Still the file the name gives: a holder that released it and a taker
     that made a new one meanwhile keep theirs.  */
  if (fstatat (lock_dirfd, name, &named, AT_SYMLINK_NOFOLLOW) < 0 || named.st_dev != held.st_dev
      || named.st_ino != held.st_ino)
    return 0;
  return unlinkat (lock_dirfd, name, 0) == 0 ? 1 : -1;
}

static int
compare_ids (const void *a, const void *b)
{
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

  return x < y ? -1 : x > y;
}

int
sp_probe_identity_sweep (int lock_dirfd, uint32_t **ids, size_t *n, sp_error_t *err)
{
  cleanup_dir DIR *dir = NULL;
  struct dirent *de;
  int fd;

  *ids = NULL;
  *n = 0;
  fd = openat (lock_dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 || (dir = fdopendir (fd)) == NULL)
    {
      int e = errno;

      if (fd >= 0)
        close (fd);
      return sp_make_error (err, e, "list the probe ids' lock files");
    }
  while ((errno = 0, de = readdir (dir)) != NULL)
    {
      uint32_t id, *grown;
      int gone;

      if (!id_name (de->d_name, &id))
        continue;
      gone = sweep_one (lock_dirfd, de->d_name);
      if (gone < 0)
        return sp_make_error (err, errno, "remove the stale lock file of host id %" PRIu32, id);
      if (gone == 0)
        continue;
      grown = realloc (*ids, (*n + 1) * sizeof (**ids));
      if (grown == NULL)
        return sp_make_error (err, ENOMEM, "allocate");
      *ids = grown;
      (*ids)[(*n)++] = id;
    }
  if (errno != 0)
    return sp_make_error (err, errno, "list the probe ids' lock files");
  if (*n > 1)
    qsort (*ids, *n, sizeof (**ids), compare_ids);
  return 0;
}

static bool
in_range (unsigned long id, uint32_t base, uint32_t count)
{
  return id >= base && id - base < count;
}

/* Whether /proc/PID/status names an id of the range on its Uid: or Gid:
   line (real, effective, saved, filesystem).  A process gone meanwhile
   holds nothing.  */
static bool
process_holds (int procfd, const char *pid, uint32_t base, uint32_t count, unsigned long *held)
{
  cleanup_free char *text = NULL;
  cleanup_close int fd = -1;
  char path[300];
  size_t len = 0;
  sp_error_t err = NULL;

  snprintf (path, sizeof (path), "%s/status", pid);
  fd = openat (procfd, path, O_RDONLY | O_CLOEXEC);
  if (fd < 0 || sp_read_fd_capped (fd, 64 * 1024, &text, &len, &err) < 0)
    {
      sp_error_release (&err);
      return false;
    }
  for (char *line = text, *next; line != NULL; line = next)
    {
      next = strchr (line, '\n');
      if (next != NULL)
        *next++ = '\0';
      /* A zombie (an orphaned sandbox's init that nobody reaped yet) runs
         nothing and opens nothing: its ids are free.  */
      if (strncmp (line, "State:", 6) == 0 && strpbrk (line + 6, "ZX") != NULL)
        return false;
      if (strncmp (line, "Uid:", 4) == 0 || strncmp (line, "Gid:", 4) == 0)
        {
          char *p = line + 4;

          for (int i = 0; i < 4; i++)
            {
              unsigned long v = strtoul (p, &p, 10);

              if (in_range (v, base, count))
                {
                  *held = v;
                  return true;
                }
            }
        }
    }
  return false;
}

int
sp_probe_identity_range_free (uint32_t base, uint32_t count, sp_error_t *err)
{
  cleanup_dir DIR *proc = NULL;
  struct dirent *de;

  for (uint32_t i = 0; i < count; i++)
    {
      struct passwd pw, *pwp = NULL;
      struct group gr, *grp = NULL;
      char buf[4096];

      if (getpwuid_r (base + i, &pw, buf, sizeof (buf), &pwp) == 0 && pwp != NULL)
        return sp_make_error (err, 0, "host id %" PRIu32 " is the account `%s`", base + i, pwp->pw_name);
      if (getgrgid_r (base + i, &gr, buf, sizeof (buf), &grp) == 0 && grp != NULL)
        return sp_make_error (err, 0, "host id %" PRIu32 " is the group `%s`", base + i, grp->gr_name);
    }
  proc = opendir ("/proc");
  if (proc == NULL)
    return sp_make_error (err, errno, "list /proc");
  while ((de = readdir (proc)) != NULL)
    {
      unsigned long held = 0;

      if (de->d_name[0] < '1' || de->d_name[0] > '9')
        continue;
      if (process_holds (dirfd (proc), de->d_name, base, count, &held))
        return sp_make_error (err, 0, "host id %lu is held by the running process %s", held, de->d_name);
    }
  return 0;
}
