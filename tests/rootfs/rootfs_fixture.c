/* Shared plumbing of the rootfs tests: see rootfs_fixture.h.  */
#define _GNU_SOURCE
#include "rootfs_fixture.h"

#include <archive.h>
#include <archive_entry.h>
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>

#include "base/cleanup.h"
#include "os/fileio.h"

#include "rootfs/build.h"
#include "rootfs/lock.h"
#include "tree/remove.h"

#define FX_ARCHIVE_MAX (4 * 1024 * 1024)
#define FX_VERSION     "1.0"
#define FX_ARCH        "all"

struct fx_env fx;

void
fx_setup (void)
{
  memset (&fx, 0, sizeof (fx));
  strcpy (fx.dir, "/tmp/sp-rootfs-test-XXXXXX");
  ck_assert_ptr_nonnull (mkdtemp (fx.dir));
  snprintf (fx.debs, sizeof (fx.debs), "%s/debs", fx.dir);
  snprintf (fx.lock, sizeof (fx.lock), "%s/rootfs.lock", fx.dir);
  snprintf (fx.out, sizeof (fx.out), "%s/out", fx.dir);
  ck_assert_int_eq (mkdir (fx.debs, 0755), 0);
  fx.lock_text = strdup (SP_LOCK_HEADER "\n");
  ck_assert_ptr_nonnull (fx.lock_text);
  /* The synthetic packages' python3.11 is no interpreter: nothing to
     compile the stdlib with.  A test that wants the compile step clears it.  */
  fx.build_flags = SP_ROOTFS_BUILD_NO_PYC;
}

void
fx_teardown (void)
{
  cleanup_error sp_error_t err = NULL;

  if (sp_tree_remove_at (AT_FDCWD, fx.dir, &err) < 0)
    ck_abort_msg ("remove the scratch directory: %s", sp_error_message (err));
  free (fx.lock_text);
  free (fx.error);
  fx.lock_text = fx.error = NULL;
}

/* Appends an entry to an open archive writer.  */
static void
add_member (struct archive *a, const struct fx_member *m)
{
  struct archive_entry *e = archive_entry_new ();
  size_t len = (m->type == 'f' && m->data) ? strlen (m->data) : 0;

  archive_entry_set_pathname (e, m->path);
  archive_entry_set_uid (e, 1000);
  archive_entry_set_gid (e, 1000);
  archive_entry_set_mtime (e, 1234567890, 0);
  switch (m->type)
    {
    case 'f':
      archive_entry_set_filetype (e, AE_IFREG);
      archive_entry_set_perm (e, m->mode ? m->mode : 0644);
      archive_entry_set_size (e, (la_int64_t)len);
      break;
    case 'd':
      archive_entry_set_filetype (e, AE_IFDIR);
      archive_entry_set_perm (e, m->mode ? m->mode : 0755);
      break;
    case 'l':
      archive_entry_set_filetype (e, AE_IFLNK);
      archive_entry_set_perm (e, 0777);
      archive_entry_set_symlink (e, m->data);
      break;
    case 'h':
      archive_entry_set_filetype (e, AE_IFREG);
      archive_entry_set_perm (e, 0644);
      archive_entry_set_hardlink (e, m->data);
      archive_entry_set_size (e, 0);
      break;
    case 'c':
    case 'b':
      archive_entry_set_filetype (e, m->type == 'c' ? AE_IFCHR : AE_IFBLK);
      archive_entry_set_perm (e, 0666);
      archive_entry_set_rdev (e, makedev (1, 3));
      break;
    case 'p':
      archive_entry_set_filetype (e, AE_IFIFO);
      archive_entry_set_perm (e, 0644);
      break;
    default:
      ck_abort_msg ("unknown member type %c", m->type);
    }
  ck_assert_int_eq (archive_write_header (a, e), ARCHIVE_OK);
  if (len)
    ck_assert_int_eq (archive_write_data (a, m->data, len), (la_ssize_t)len);
  archive_entry_free (e);
}

/* A tar.xz of members, in memory.  */
static char *
make_tar_xz (const struct fx_member *members, size_t count, size_t *len)
{
  struct archive *a = archive_write_new ();
  char *buf = malloc (FX_ARCHIVE_MAX);

  ck_assert_ptr_nonnull (buf);
  ck_assert_int_eq (archive_write_set_format_pax_restricted (a), ARCHIVE_OK);
  ck_assert_int_eq (archive_write_add_filter_xz (a), ARCHIVE_OK);
  ck_assert_int_eq (archive_write_open_memory (a, buf, FX_ARCHIVE_MAX, len), ARCHIVE_OK);
  for (size_t i = 0; i < count; i++)
    add_member (a, &members[i]);
  ck_assert_int_eq (archive_write_close (a), ARCHIVE_OK);
  archive_write_free (a);
  return buf;
}

static void
add_ar_member (struct archive *a, const char *name, const void *data, size_t len)
{
  struct archive_entry *e = archive_entry_new ();

  archive_entry_set_pathname (e, name);
  archive_entry_set_filetype (e, AE_IFREG);
  archive_entry_set_perm (e, 0644);
  archive_entry_set_size (e, (la_int64_t)len);
  ck_assert_int_eq (archive_write_header (a, e), ARCHIVE_OK);
  ck_assert_int_eq (archive_write_data (a, data, len), (la_ssize_t)len);
  archive_entry_free (e);
}

void
fx_add_package (const char *name, const struct fx_member *members, size_t count,
                const struct fx_deb_options *options)
{
  static const struct fx_deb_options defaults = { 0 };
  static const struct fx_member control[] = { { 'f', "./control", "Package: fixture\n", 0 } };
  const struct fx_deb_options *o = options ? options : &defaults;
  const char *debian_binary = o->debian_binary ? o->debian_binary : "2.0\n";
  cleanup_free char *control_tar = NULL;
  cleanup_free char *data_tar = NULL;
  cleanup_free char *deb = NULL;
  cleanup_free char *path = NULL;
  cleanup_error sp_error_t err = NULL;
  cleanup_close int fd = -1;
  size_t control_len, data_len, deb_len = 0;
  uint8_t digest[SP_SHA256_BYTES];
  char hex[SP_SHA256_HEX + 1];
  char *text;

  deb = malloc (FX_ARCHIVE_MAX);
  ck_assert_ptr_nonnull (deb);
  if (o->garbage)
    {
      strcpy (deb, "this is not an ar archive\n");
      deb_len = strlen (deb);
    }
  else
    {
      struct archive *a = archive_write_new ();

      control_tar = make_tar_xz (control, 1, &control_len);
      data_tar = make_tar_xz (members, count, &data_len);
      ck_assert_int_eq (archive_write_set_format_ar_svr4 (a), ARCHIVE_OK);
      ck_assert_int_eq (archive_write_open_memory (a, deb, FX_ARCHIVE_MAX, &deb_len), ARCHIVE_OK);
      add_ar_member (a, "debian-binary", debian_binary, strlen (debian_binary));
      add_ar_member (a, "control.tar.xz", control_tar, control_len);
      add_ar_member (a, o->data_name ? o->data_name : "data.tar.xz", data_tar, data_len);
      if (o->member_after_data)
        add_ar_member (a, "_extra", "x", 1);
      ck_assert_int_eq (archive_write_close (a), ARCHIVE_OK);
      archive_write_free (a);
    }
  if (o->truncate_to)
    {
      ck_assert_uint_lt (o->truncate_to, deb_len);
      deb_len = o->truncate_to;
    }
  if (o->truncate_by)
    {
      ck_assert_uint_lt (o->truncate_by, deb_len);
      deb_len -= o->truncate_by;
    }

  ck_assert_int_ge (asprintf (&path, "%s/%s_%s_%s.deb", fx.debs, name, FX_VERSION, FX_ARCH), 0);
  fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ck_assert_int_ge (fd, 0);
  ck_assert_int_eq (sp_write_all (fd, deb, deb_len, &err), 0);

  sp_sha256 (deb, deb_len, digest);
  if (o->wrong_sha)
    digest[0] ^= 0xff;
  sp_sha256_hex (digest, hex);
  ck_assert_int_ge (asprintf (&text, "%s%s %s %s %s\n", fx.lock_text, name, FX_VERSION, FX_ARCH, hex), 0);
  free (fx.lock_text);
  fx.lock_text = text;
}

bool
fx_build_into (const char *out)
{
  cleanup_error sp_error_t err = NULL;

  fx_write_file (fx.lock, fx.lock_text);
  free (fx.error);
  fx.error = NULL;
  memset (fx.digest, 0, sizeof (fx.digest));
  if (sp_rootfs_build (fx.lock, fx.debs, out ? out : fx.out, fx.build_flags, fx.digest, &err) == 0)
    return true;
  fx.error = strdup (sp_error_message (err));
  return false;
}

bool
fx_error_has (const char *needle)
{
  if (fx.error && strstr (fx.error, needle))
    return true;
  fprintf (stderr, "# expected an error with \"%s\", got: %s\n", needle, fx.error ? fx.error : "(success)");
  return false;
}

static int
compare_strings (const void *a, const void *b)
{
  return strcmp (*(char *const *)a, *(char *const *)b);
}

char *
fx_list_dir (const char *path)
{
  cleanup_dir DIR *dir = opendir (path);
  char *names[256];
  size_t n = 0, total = 1;
  struct dirent *de;
  char *joined;

  ck_assert_ptr_nonnull (dir);
  while ((de = readdir (dir)) != NULL)
    if (strcmp (de->d_name, ".") && strcmp (de->d_name, ".."))
      {
        ck_assert_uint_lt (n, 256);
        names[n] = strdup (de->d_name);
        total += strlen (de->d_name) + 1;
        n++;
      }
  qsort (names, n, sizeof (*names), compare_strings);
  joined = calloc (1, total);
  for (size_t i = 0; i < n; i++)
    {
      if (i)
        strcat (joined, " ");
      strcat (joined, names[i]);
      free (names[i]);
    }
  return joined;
}

void
fx_write_file (const char *path, const char *text)
{
  cleanup_error sp_error_t err = NULL;
  cleanup_close int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

  ck_assert_int_ge (fd, 0);
  ck_assert_int_eq (sp_write_all (fd, text, strlen (text), &err), 0);
}

/* Reads both pipes to their ends.  */
static void
drain (int out_fd, int err_fd, char **out, char **err)
{
  int fds[2] = { out_fd, err_fd };
  char **bufs[2] = { out, err };
  size_t lens[2] = { 0, 0 };
  int open_count = 2;

  *out = calloc (1, 1);
  *err = calloc (1, 1);
  while (open_count > 0)
    {
      struct pollfd p[2];
      int n = 0;
      int which[2];

      for (int i = 0; i < 2; i++)
        if (fds[i] >= 0)
          {
            p[n].fd = fds[i];
            p[n].events = POLLIN;
            which[n++] = i;
          }
      ck_assert_int_ge (poll (p, (nfds_t)n, -1), 0);
      for (int j = 0; j < n; j++)
        {
          int i = which[j];
          char chunk[4096];
          ssize_t r;

          if (!(p[j].revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
          r = read (fds[i], chunk, sizeof (chunk));
          if (r <= 0)
            {
              close (fds[i]);
              fds[i] = -1;
              open_count--;
              continue;
            }
          *bufs[i] = realloc (*bufs[i], lens[i] + (size_t)r + 1);
          memcpy (*bufs[i] + lens[i], chunk, (size_t)r);
          lens[i] += (size_t)r;
          (*bufs[i])[lens[i]] = '\0';
        }
    }
}

int
fx_run (char *const argv[], char **out, char **err)
{
  int out_pipe[2], err_pipe[2];
  int status;
  pid_t pid;

  ck_assert_int_eq (pipe2 (out_pipe, O_CLOEXEC), 0);
  ck_assert_int_eq (pipe2 (err_pipe, O_CLOEXEC), 0);
  pid = fork ();
  ck_assert_int_ge (pid, 0);
  if (pid == 0)
    {
      dup2 (out_pipe[1], STDOUT_FILENO);
      dup2 (err_pipe[1], STDERR_FILENO);
      execv (argv[0], argv);
      _exit (127);
    }
  close (out_pipe[1]);
  close (err_pipe[1]);
  drain (out_pipe[0], err_pipe[0], out, err);
  ck_assert_int_eq (waitpid (pid, &status, 0), pid);
  return WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
}

const char *
fx_deb_cache (void)
{
  const char *dir = getenv ("SP_DEB_CACHE");
  return dir && *dir ? dir : FX_DEFAULT_DEB_CACHE;
}

char *
fx_missing_deb (const char *lock_path)
{
  cleanup_error sp_error_t err = NULL;
  struct sp_lock lock = { 0 };
  char *why = NULL;

  if (sp_lock_load (lock_path, &lock, &err) < 0)
    return strdup (sp_error_message (err));
  for (size_t i = 0; i < lock.count && why == NULL; i++)
    {
      char name[SP_LOCK_DEB_NAME_SIZE];
      char path[PATH_MAX];

      sp_lock_deb_filename (&lock.entries[i], name);
      snprintf (path, sizeof (path), "%s/%s", fx_deb_cache (), name);
      if (access (path, R_OK) < 0
          && asprintf (&why,
                       "%s is missing: run scripts/rootfs-fetch first (it fetches the pinned .debs into "
                       "$SP_DEB_CACHE, default " FX_DEFAULT_DEB_CACHE ")",
                       path)
                 < 0)
        why = NULL;
    }
  sp_lock_release (&lock);
  return why;
}
