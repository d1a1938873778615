/* A sandbox's cgroup statistics: see src/runtimes/cgroup_stats.h.  */
#define _GNU_SOURCE
#include "runtimes/cgroup_stats.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "os/open_beneath.h"

/* Every file read here is a few lines; a bigger one is not what we expect.  */
#define STAT_FILE_MAX_BYTES 4096
#define CGROUP_PATH_MAX     1024

static int
check_cgroup_path (const char *path, sp_error_t *err)
{
  size_t len = strlen (path);

  if (path[0] != '/')
    return sp_make_error (err, 0, "cgroup path `%s` is not absolute", path);
  if (len < 2 || len > CGROUP_PATH_MAX)
    return sp_make_error (err, 0, "cgroup path must be 2 to %d bytes", CGROUP_PATH_MAX);
  for (const char *c = path + 1; *c;)
    {
      size_t n = strcspn (c, "/");

      if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
        return sp_make_error (err, 0, "cgroup path `%s` has an empty, `.` or `..` component", path);
      for (size_t i = 0; i < n; i++)
        if ((unsigned char)c[i] < 0x20 || c[i] == 0x7f)
          return sp_make_error (err, 0, "cgroup path has a control character");
      c += n;
      if (*c == '/')
        c++;
      if (*c == '\0' && c[-1] == '/')
        return sp_make_error (err, 0, "cgroup path `%s` has an empty, `.` or `..` component", path);
    }
  return 0;
}

/* Reads rel below the controller directory ctl_fd into buf (NUL-terminated). */
static int
read_small (int ctl_fd, const char *rel, const char *shown, char *buf, sp_error_t *err)
{
  cleanup_close int fd = sp_open_beneath (ctl_fd, rel, O_RDONLY | O_NOFOLLOW);
  size_t used = 0;

  if (fd < 0)
    return sp_make_error (err, errno, "open `%s`", shown);
  for (;;)
    {
      ssize_t n = TEMP_FAILURE_RETRY (read (fd, buf + used, STAT_FILE_MAX_BYTES - used));

      if (n < 0)
        return sp_make_error (err, errno, "read `%s`", shown);
      if (n == 0)
        break;
      used += (size_t)n;
      if (used == STAT_FILE_MAX_BYTES)
        return sp_make_error (err, 0, "`%s` is larger than %d bytes", shown, STAT_FILE_MAX_BYTES - 1);
    }
  buf[used] = '\0';
  return 0;
}

/* Decimal digits only, no sign, no leading zero but "0", no overflow.
   Returns the number of bytes taken, or 0.  */
static size_t
parse_u64 (const char *s, uint64_t *out)
{
  uint64_t v = 0;
  size_t i = 0;

  while (s[i] >= '0' && s[i] <= '9')
    {
      unsigned d = (unsigned)(s[i] - '0');

      if (i == 1 && s[0] == '0')
        return 0;
      if (v > (UINT64_MAX - d) / 10)
        return 0;
      v = v * 10 + d;
      i++;
      if (i > 20)
        return 0;
    }
  if (i > 0)
    *out = v;
  return i;
}

/* A file holding one number and a newline.  */
static int
parse_single (const char *buf, const char *shown, uint64_t *out, sp_error_t *err)
{
  size_t n = parse_u64 (buf, out);

  if (n == 0 || strcmp (buf + n, "\n") != 0)
    return sp_make_error (err, 0, "`%s`: not one unsigned decimal number and a newline", shown);
  return 0;
}

/* A flat keyed file ("key value\n" lines, as memory.events, cpu.stat and
   memory.oom_control are): every line must have that shape, and key must
   appear exactly once.  */
static int
parse_keyed (const char *buf, const char *key, const char *shown, uint64_t *out, sp_error_t *err)
{
  size_t keylen = strlen (key);
  bool found = false;

  for (const char *line = buf; *line;)
    {
      size_t name = strspn (line, "abcdefghijklmnopqrstuvwxyz0123456789_");
      uint64_t v;
      size_t digits;

      if (name == 0 || line[name] != ' ')
        return sp_make_error (err, 0, "`%s`: malformed line", shown);
      digits = parse_u64 (line + name + 1, &v);
      if (digits == 0 || line[name + 1 + digits] != '\n')
        return sp_make_error (err, 0, "`%s`: malformed value", shown);
      if (name == keylen && memcmp (line, key, keylen) == 0)
        {
          if (found)
            return sp_make_error (err, 0, "`%s`: `%s` appears twice", shown, key);
          found = true;
          *out = v;
        }
      line += name + 1 + digits + 1;
    }
  if (!found)
    return sp_make_error (err, 0, "`%s`: no `%s` line", shown, key);
  return 0;
}

/* Opens the controller directory ctl below root_fd ("" for the v2 root).
   It may be a symlink on some hosts (cpuacct -> cpu,cpuacct): the cgroup
   root is the kernel's, so following it there is safe.  */
static int
open_controller (int root_fd, const char *root, const char *ctl, sp_error_t *err)
{
  int fd = openat (root_fd, ctl[0] ? ctl : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);

  if (fd < 0)
    return sp_make_error (err, errno, "open `%s/%s`", root, ctl);
  return fd;
}

static int
read_value (int root_fd, const char *root, const char *ctl, const char *cgroup_path, const char *file,
            const char *key, uint64_t *out, sp_error_t *err)
{
  cleanup_close int ctl_fd = -1;
  char rel[CGROUP_PATH_MAX + 64];
  char shown[PATH_MAX + CGROUP_PATH_MAX + 64];
  char buf[STAT_FILE_MAX_BYTES + 1];

  snprintf (rel, sizeof (rel), "%s/%s", cgroup_path + 1, file);
  snprintf (shown, sizeof (shown), "%s%s%s/%s", root, ctl[0] ? "/" : "", ctl, rel);
  ctl_fd = open_controller (root_fd, root, ctl, err);
  if (ctl_fd < 0)
    return -1;
  if (read_small (ctl_fd, rel, shown, buf, err) < 0)
    return -1;
  return key ? parse_keyed (buf, key, shown, out, err) : parse_single (buf, shown, out, err);
}

int
sp_cgroup_stats_read_under (const char *root, const char *cgroup_path, struct sp_cgroup_stats *stats,
                            sp_error_t *err)
{
  cleanup_close int root_fd = -1;
  struct sp_cgroup_stats s = { 0 };
  struct stat st;
  uint64_t usec = 0;

  if (root == NULL || root[0] != '/' || strlen (root) >= PATH_MAX)
    return sp_make_error (err, 0, "cgroup root must be an absolute path");
  if (cgroup_path == NULL)
    return sp_make_error (err, 0, "no cgroup path");
  if (check_cgroup_path (cgroup_path, err) < 0)
    return -1;
  root_fd = open (root, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root_fd < 0)
    return sp_make_error (err, errno, "open `%s`", root);

  if (fstatat (root_fd, "cgroup.controllers", &st, AT_SYMLINK_NOFOLLOW) == 0)
    {
      if (read_value (root_fd, root, "", cgroup_path, "memory.peak", NULL, &s.peak_memory_bytes, err) < 0
          || read_value (root_fd, root, "", cgroup_path, "memory.events", "oom_kill", &s.oom_kills, err) < 0
          || read_value (root_fd, root, "", cgroup_path, "cpu.stat", "usage_usec", &usec, err) < 0)
        return -1;
      if (usec > UINT64_MAX / 1000)
        return sp_make_error (err, 0, "`%s%s/cpu.stat`: usage_usec out of range", root, cgroup_path);
      s.cpu_ns = usec * 1000;
    }
  else if (errno == ENOENT)
    {
      if (read_value (root_fd, root, "memory", cgroup_path, "memory.max_usage_in_bytes", NULL,
                      &s.peak_memory_bytes, err)
              < 0
          || read_value (root_fd, root, "memory", cgroup_path, "memory.oom_control", "oom_kill", &s.oom_kills,
                         err)
                 < 0
          || read_value (root_fd, root, "cpuacct", cgroup_path, "cpuacct.usage", NULL, &s.cpu_ns, err) < 0)
        return -1;
    }
  else
    return sp_make_error (err, errno, "stat `%s/cgroup.controllers`", root);
  *stats = s;
  return 0;
}

int
sp_cgroup_stats_read (const char *cgroup_path, struct sp_cgroup_stats *stats, sp_error_t *err)
{
  return sp_cgroup_stats_read_under (SP_CGROUP_ROOT, cgroup_path, stats, err);
}
