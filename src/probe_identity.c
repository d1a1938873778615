/* The probe's host identity: see include/sealed-probe/probe_identity.h.  */
#define _GNU_SOURCE
#include <sealed-probe/probe_identity.h>

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
#include <sys/wait.h>
#include <unistd.h>

#include <sealed-probe/bounds.h>
#include <sealed-probe/bundle.h>
#include <sealed-probe/cleanup.h>
#include <sealed-probe/fileio.h>

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

int
sp_probe_identity_make (uint32_t base, unsigned slot, struct sp_probe_identity *id, sp_error_t *err)
{
  cleanup_close int ready_r = -1;
  cleanup_close int ready_w = -1;
  char path[64];
  char c = 0;
  int sync[2];
  pid_t pid;
  int ret = -1;

  sp_bundle_slot_ids (base, slot, &id->host_root_id, &id->host_probe_id);
  id->idmap_userns_fd = -1;
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
