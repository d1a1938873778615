/* The sandbox's image under Docker: the verified rootfs, streamed as a tar
   into the Engine's import endpoint and labelled with its digest, never
   pulled from a registry (docs/runtimes.md, "Docker").  */
#define _GNU_SOURCE
#include "docker.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <sealed-probe/cleanup.h>

static void
archive_write_freep (struct archive **a)
{
  if (*a != NULL)
    archive_write_free (*a);
  *a = NULL;
}

static void
archive_read_freep (struct archive **a)
{
  if (*a != NULL)
    archive_read_free (*a);
  *a = NULL;
}

/* root as a POSIX tar in a memory file: every entry relative to root,
   owners and modes as they are (root's, read-only: rootfs_verify).  */
static int
tar_tree (const char *root, int *out_fd, sp_error_t *err)
{
  struct archive *disk __attribute__ ((cleanup (archive_read_freep))) = archive_read_disk_new ();
  struct archive *tar __attribute__ ((cleanup (archive_write_freep))) = archive_write_new ();
  cleanup_close int fd = memfd_create ("sealed-probe-rootfs-tar", MFD_CLOEXEC);
  size_t root_len = strlen (root);
  char buf[64 * 1024];

  if (fd < 0)
    return sp_make_error (err, errno, "image: memfd_create");
  if (disk == NULL || tar == NULL)
    return sp_make_error (err, ENOMEM, "image: libarchive");
  if (archive_write_set_format_pax_restricted (tar) != ARCHIVE_OK
      || archive_write_open_fd (tar, fd) != ARCHIVE_OK)
    return sp_make_error (err, 0, "image: tar: %s", archive_error_string (tar));
  archive_read_disk_set_symlink_physical (disk);
  archive_read_disk_set_standard_lookup (disk);
  if (archive_read_disk_open (disk, root) != ARCHIVE_OK)
    return sp_make_error (err, 0, "image: read `%s`: %s", root, archive_error_string (disk));
  for (;;)
    {
      struct archive_entry *entry = archive_entry_new ();
      const char *path;
      int r;

      if (entry == NULL)
        return sp_make_error (err, ENOMEM, "image: libarchive");
      r = archive_read_next_header2 (disk, entry);
      if (r == ARCHIVE_EOF)
        {
          archive_entry_free (entry);
          break;
        }
      if (r != ARCHIVE_OK)
        {
          archive_entry_free (entry);
          return sp_make_error (err, 0, "image: read `%s`: %s", root, archive_error_string (disk));
        }
      archive_read_disk_descend (disk);
      path = archive_entry_pathname (entry);
      if (strncmp (path, root, root_len) != 0 || (path[root_len] != '/' && path[root_len] != '\0'))
        {
          archive_entry_free (entry);
          return sp_make_error (err, 0, "image: `%s` is outside the rootfs", path);
        }
      {
        cleanup_free char *rel = NULL;
        if (asprintf (&rel, ".%s", path[root_len] ? path + root_len : "/") < 0)
          {
            archive_entry_free (entry);
            return sp_make_error (err, ENOMEM, "image: allocate");
          }
        archive_entry_set_pathname (entry, rel);
      }
      if (archive_write_header (tar, entry) != ARCHIVE_OK)
        {
          archive_entry_free (entry);
          return sp_make_error (err, 0, "image: tar: %s", archive_error_string (tar));
        }
      if (archive_entry_filetype (entry) == AE_IFREG && archive_entry_size (entry) > 0)
        {
          cleanup_close int file = open (archive_entry_sourcepath (entry), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
          ssize_t n;

          if (file < 0)
            {
              archive_entry_free (entry);
              return sp_make_error (err, errno, "image: open `%s`", path);
            }
          while ((n = read (file, buf, sizeof (buf))) > 0)
            if (archive_write_data (tar, buf, (size_t)n) != n)
              {
                archive_entry_free (entry);
                return sp_make_error (err, 0, "image: tar: %s", archive_error_string (tar));
              }
          if (n < 0)
            {
              archive_entry_free (entry);
              return sp_make_error (err, errno, "image: read `%s`", path);
            }
        }
      archive_entry_free (entry);
    }
  if (archive_write_close (tar) != ARCHIVE_OK)
    return sp_make_error (err, 0, "image: tar: %s", archive_error_string (tar));
  if (lseek (fd, 0, SEEK_SET) < 0)
    return sp_make_error (err, errno, "image: rewind");
  *out_fd = get_and_reset_fd (&fd);
  return 0;
}

/* The digest label of the image, or NULL when there is no such image.  */
static int
image_label (const char *socket, const char *image, char **label, sp_error_t *err)
{
  static const long ok[] = { 200, 404, 0 };
  cleanup_json struct sp_json *json = NULL;
  cleanup_free char *path = NULL;
  const struct sp_json *labels, *value;
  long status = 0;

  *label = NULL;
  if (asprintf (&path, DOCKER_API_PREFIX "/images/%s/json", image) < 0)
    {
      path = NULL;
      return sp_make_error (err, ENOMEM, "allocate");
    }
  if (docker_api_json (socket, "GET", path, NULL, ok, 0, &json, &status, err) < 0)
    return -1;
  if (status == 404)
    return 0;
  labels = sp_json_object_get (sp_json_object_get (json, "Config"), "Labels");
  value = sp_json_object_get (labels, DOCKER_LABEL_ROOTFS);
  *label = strdup (value && value->type == SP_JSON_STRING ? value->u.string.data : "");
  return *label ? 0 : sp_make_error (err, ENOMEM, "allocate");
}

int
docker_image_name (const char *digest, char **image, sp_error_t *err)
{
  const char *hex = strncmp (digest, "sha256:", 7) == 0 ? digest + 7 : NULL;

  *image = NULL;
  if (hex == NULL || strlen (hex) != 64 || strspn (hex, "0123456789abcdef") != 64)
    return sp_make_error (err, 0, "image: `%.80s` is not a sha256 digest", digest);
  if (asprintf (image, "%s:%.12s", DOCKER_IMAGE_REPO, hex) < 0)
    {
      *image = NULL;
      return sp_make_error (err, ENOMEM, "allocate");
    }
  return 0;
}

int
docker_image_ensure (const char *socket, const char *rootfs_root, const char *digest, char **image_ref,
                     sp_error_t *err)
{
  static const long ok[] = { 200, 0 };
  cleanup_free char *image = NULL;
  cleanup_free char *label = NULL;
  cleanup_free char *change = NULL;
  cleanup_free char *change_q = NULL;
  cleanup_free char *path = NULL;
  cleanup_close int tar_fd = -1;
  struct docker_response r;
  const char *hex = strncmp (digest, "sha256:", 7) == 0 ? digest + 7 : NULL;

  *image_ref = NULL;
  if (hex == NULL || strlen (hex) != 64)
    return sp_make_error (err, 0, "image: `%s` is not a sha256 digest", digest);
  if (asprintf (&image, "%s:%.12s", DOCKER_IMAGE_REPO, hex) < 0)
    {
      image = NULL;
      return sp_make_error (err, ENOMEM, "allocate");
    }
  if (image_label (socket, image, &label, err) < 0)
    return sp_error_wrap (err, "image `%s`", image);
  if (label != NULL && strcmp (label, digest) != 0)
    return sp_make_error (
        err, 0,
        "image `%s`: its digest label does not match the rootfs serve verified (label `%.80s`, rootfs %s); "
        "remove the image and restart",
        image, label, digest);
  if (label == NULL)
    {
      if (tar_tree (rootfs_root, &tar_fd, err) < 0)
        return -1;
      if (asprintf (&change, "LABEL %s=%s", DOCKER_LABEL_ROOTFS, digest) < 0
          || (change_q = docker_api_escape (change)) == NULL
          || asprintf (&path, DOCKER_API_PREFIX "/images/create?fromSrc=-&repo=%s&tag=%.12s&changes=%s",
                       DOCKER_IMAGE_REPO, hex, change_q)
                 < 0)
        {
          path = NULL;
          return sp_make_error (err, ENOMEM, "allocate");
        }
      if (docker_api_call (socket, "POST", path, NULL, tar_fd, DOCKER_IMPORT_TIMEOUT_MS, &r, err) < 0)
        return sp_error_wrap (err, "image: import");
      if (r.status != ok[0])
        {
          long status = r.status;
          docker_response_release (&r);
          return sp_make_error (err, 0, "image: the import answered status %ld", status);
        }
      docker_response_release (&r);
      if (image_label (socket, image, &label, err) < 0)
        return sp_error_wrap (err, "image `%s`", image);
      if (label == NULL || strcmp (label, digest) != 0)
        return sp_make_error (err, 0, "image `%s`: after the import its digest label is not %s", image,
                              digest);
    }
  *image_ref = get_and_reset (&image);
  return 0;
}
