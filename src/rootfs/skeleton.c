/* The skeleton: see skeleton.h.  */
#define _GNU_SOURCE
#include "rootfs/skeleton.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"

/* Parents before children.  */
const struct sp_skeleton_entry sp_rootfs_skeleton[] = {
  { "proc", true },            /* procfs */
  { "sys", true },             /* sysfs, read-only */
  { "dev", true },             /* the minimal /dev tmpfs */
  { "tmp", true },             /* the small tmpfs */
  { "probe", true },           /* everything of the invocation */
  { "probe/repo", true },      /* rw bind of the repository copy; the process's cwd */
  { "probe/probe.py", false }, /* ro bind of the script */
  { "probe/out", false },      /* bind of the result file the host reads afterwards */
};
const size_t sp_rootfs_skeleton_count = sizeof (sp_rootfs_skeleton) / sizeof (sp_rootfs_skeleton[0]);

static int
make_one (int rootfd, const struct sp_skeleton_entry *e, sp_error_t *err)
{
  struct stat st;

  if (e->is_dir)
    {
      if (mkdirat (rootfd, e->path, 0755) == 0)
        return 0;
      if (errno != EEXIST)
        return sp_make_error (err, errno, "create the mount point `%s`", e->path);
      if (fstatat (rootfd, e->path, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return sp_make_error (err, errno, "stat `%s`", e->path);
      if (!S_ISDIR (st.st_mode))
        return sp_make_error (err, 0, "the mount point `%s` exists and is not a directory", e->path);
      return 0;
    }
  else
    {
      cleanup_close int fd
          = openat (rootfd, e->path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0644);
      if (fd < 0)
        return sp_make_error (err, errno, "create the mount point `%s`", e->path);
      return 0;
    }
}

int
sp_rootfs_make_skeleton (int rootfd, sp_error_t *err)
{
  for (size_t i = 0; i < sp_rootfs_skeleton_count; i++)
    if (make_one (rootfd, &sp_rootfs_skeleton[i], err) < 0)
      return -1;
  return 0;
}

int
sp_rootfs_check_skeleton (int rootfd, sp_error_t *err)
{
  for (size_t i = 0; i < sp_rootfs_skeleton_count; i++)
    {
      const struct sp_skeleton_entry *e = &sp_rootfs_skeleton[i];
      struct stat st;

      if (fstatat (rootfd, e->path, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return sp_make_error (err, errno, "the mount point `%s`", e->path);
      if (e->is_dir ? !S_ISDIR (st.st_mode) : !S_ISREG (st.st_mode))
        return sp_make_error (err, 0, "the mount point `%s` is not a %s", e->path,
                              e->is_dir ? "directory" : "regular file");
    }
  return 0;
}

int
sp_rootfs_open_tmp (int rootfd, sp_error_t *err)
{
  if (fchmodat (rootfd, SP_ROOTFS_TMP_DIR, SP_ROOTFS_TMP_MODE, 0) < 0)
    return sp_make_error (err, errno, "chmod the mount point `%s`", SP_ROOTFS_TMP_DIR);
  return 0;
}
