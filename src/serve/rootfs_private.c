/* The rootfs every probe of this serve runs from: a private copy of the
   verified tree, on a tmpfs mounted in serve's own mount namespace and then
   made read-only, verified again as a whole.  The host's rootfs directory
   can change after start (a file added, a module edited) without any probe
   seeing it, and no other process can change the copy: it is in no other
   mount namespace, and it is read-only in this one.  The sandbox's `/` is the
   tmpfs's `/root`, so no host path shows in its mountinfo.  See
   docs/rootfs.md ("What is verified when").  */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/bounds.h"
#include "base/cleanup.h"
#include "rootfs/copy.h"

#include "serve/serve.h"

#define PRIVATE_ROOTFS_DIR "rootfs"

int
sp_serve_rootfs_private (struct sp_serve *s, sp_error_t *err)
{
  struct sp_rootfs_info copy = { 0 };
  cleanup_close int private_fd = -1;
  char options[128];

  if (mkdirat (s->work_run_fd, PRIVATE_ROOTFS_DIR, 0700) < 0)
    return sp_make_error (err, errno, "make the private rootfs's mount point");
  if (asprintf (&s->rootfs_mount, "%s/%s", s->work_run_path, PRIVATE_ROOTFS_DIR) < 0)
    {
      s->rootfs_mount = NULL;
      return sp_make_error (err, errno, "allocate a path");
    }
  snprintf (options, sizeof (options), "mode=0711,size=%lld,nr_inodes=%lld",
            (long long)SP_ROOTFS_COPY_TMPFS_BYTES, (long long)SP_ROOTFS_COPY_TMPFS_INODES);
  /* Mounted in serve's private mount namespace (sp_serve_detach): the host
     never sees it.  nosuid and nodev where the backend allows them
     (sp_bundle_rules: runsc's gofer cannot remount a root that has them).  */
  unsigned long flags = s->rules.rootfs_nosuid_nodev ? MS_NOSUID | MS_NODEV : 0;

  if (mount ("sealed-probe-rootfs", s->rootfs_mount, "tmpfs", flags, options) < 0)
    {
      free (s->rootfs_mount);
      s->rootfs_mount = NULL;
      return sp_make_error (err, errno, "mount the private rootfs's tmpfs");
    }
  private_fd = open (s->rootfs_mount, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (private_fd < 0)
    return sp_make_error (err, errno, "open the private rootfs");
  if (sp_rootfs_copy (&s->rootfs, private_fd, err) < 0)
    return -1;
  if (mount (NULL, s->rootfs_mount, NULL, MS_REMOUNT | MS_RDONLY | flags, NULL) < 0)
    return sp_make_error (err, errno, "make the private rootfs read-only");
  /* The whole verify again, on the copy, through the read-only mount: what
     every probe will see is exactly what was verified.  */
  if (sp_rootfs_copy_verify (s->rootfs_mount, &s->rootfs, &copy, err) < 0)
    return -1;
  sp_rootfs_info_release (&s->rootfs);
  s->rootfs = copy;
  return 0;
}

void
sp_serve_rootfs_private_release (struct sp_serve *s)
{
  if (s->rootfs_mount == NULL)
    return;
  umount2 (s->rootfs_mount, MNT_DETACH);
  free (s->rootfs_mount);
  s->rootfs_mount = NULL;
}
