/* The sandbox's image under Docker: the verified rootfs, streamed as a tar
   into the Engine's import endpoint and labelled with its digest, never
   pulled from a registry (docs/runtimes.md, "Docker").  */
#define _GNU_SOURCE
#include "runtimes/docker_api.h"
#include "runtimes/docker_image.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/sha256.h"

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

static int
by_name (const struct dirent **a, const struct dirent **b)
{
  return strcmp ((*a)->d_name, (*b)->d_name);
}

static int
not_dots (const struct dirent *d)
{
  return strcmp (d->d_name, ".") != 0 && strcmp (d->d_name, "..") != 0;
}

/* One entry, root/rel ("" for root itself), and below it when it is a
   directory, in name order.  Times are zero: the same tree always makes the
   same bytes, so the layer the daemon reports (the digest of the stream it
   received) is known before the import, by content.  */
static int
tar_entry (struct archive *disk, struct archive *tar, const char *root, const char *rel, char *buf,
           size_t size, sp_error_t *err)
{
  cleanup_free char *path = NULL;
  cleanup_free char *name = NULL;
  struct archive_entry *entry;
  struct dirent **kids = NULL;
  int n, ret = 0;

  if (asprintf (&path, "%s%s", root, rel) < 0 || asprintf (&name, ".%s", rel[0] ? rel : "/") < 0)
    return sp_make_error (err, ENOMEM, "image: allocate");
  entry = archive_entry_new ();
  if (entry == NULL)
    return sp_make_error (err, ENOMEM, "image: libarchive");
  archive_entry_copy_sourcepath (entry, path);
  if (archive_read_disk_entry_from_file (disk, entry, -1, NULL) != ARCHIVE_OK)
    {
      archive_entry_free (entry);
      return sp_make_error (err, 0, "image: read `%s`: %s", path, archive_error_string (disk));
    }
  archive_entry_set_pathname (entry, name);
  archive_entry_set_mtime (entry, 0, 0);
  archive_entry_unset_atime (entry);
  archive_entry_unset_ctime (entry);
  archive_entry_unset_birthtime (entry);
  if (archive_write_header (tar, entry) != ARCHIVE_OK)
    ret = sp_make_error (err, 0, "image: tar: %s", archive_error_string (tar));
  else if (archive_entry_filetype (entry) == AE_IFREG && archive_entry_size (entry) > 0)
    {
      cleanup_close int file = open (path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
      ssize_t got;

      if (file < 0)
        ret = sp_make_error (err, errno, "image: open `%s`", path);
      while (ret == 0 && (got = read (file, buf, size)) != 0)
        if (got < 0)
          ret = sp_make_error (err, errno, "image: read `%s`", path);
        else if (archive_write_data (tar, buf, (size_t)got) != got)
          ret = sp_make_error (err, 0, "image: tar: %s", archive_error_string (tar));
    }
  if (ret < 0 || archive_entry_filetype (entry) != AE_IFDIR)
    {
      archive_entry_free (entry);
      return ret;
    }
  archive_entry_free (entry);
  n = scandir (path, &kids, not_dots, by_name);
  if (n < 0)
    return sp_make_error (err, errno, "image: list `%s`", path);
  for (int i = 0; i < n; i++)
    {
      cleanup_free char *child = NULL;

      if (ret == 0 && asprintf (&child, "%s/%s", rel, kids[i]->d_name) < 0)
        {
          child = NULL;
          ret = sp_make_error (err, ENOMEM, "image: allocate");
        }
      if (ret == 0)
        ret = tar_entry (disk, tar, root, child, buf, size, err);
      free (kids[i]);
    }
  free (kids);
  return ret;
}

/* root as a POSIX tar in a memory file: every entry relative to root, in
   name order, owners and modes as they are (root's, read-only:
   rootfs_verify), times zero; *layer is the stream's digest, the layer id
   the daemon reports for it once imported.  */
static int
tar_tree (const char *root, int *out_fd, char layer[SP_DIGEST_TEXT_SIZE], sp_error_t *err)
{
  struct archive *disk __attribute__ ((cleanup (archive_read_freep))) = archive_read_disk_new ();
  struct archive *tar __attribute__ ((cleanup (archive_write_freep))) = archive_write_new ();
  cleanup_close int fd = memfd_create ("sealed-probe-rootfs-tar", MFD_CLOEXEC);
  struct sp_sha256 hash;
  uint8_t sum[SP_SHA256_BYTES];
  char buf[64 * 1024];
  ssize_t n;

  if (fd < 0)
    return sp_make_error (err, errno, "image: memfd_create");
  if (disk == NULL || tar == NULL)
    return sp_make_error (err, ENOMEM, "image: libarchive");
  if (archive_write_set_format_pax_restricted (tar) != ARCHIVE_OK
      || archive_write_open_fd (tar, fd) != ARCHIVE_OK)
    return sp_make_error (err, 0, "image: tar: %s", archive_error_string (tar));
  archive_read_disk_set_symlink_physical (disk);
  archive_read_disk_set_standard_lookup (disk);
  if (tar_entry (disk, tar, root, "", buf, sizeof (buf), err) < 0)
    return -1;
  if (archive_write_close (tar) != ARCHIVE_OK)
    return sp_make_error (err, 0, "image: tar: %s", archive_error_string (tar));
  if (lseek (fd, 0, SEEK_SET) < 0)
    return sp_make_error (err, errno, "image: rewind");
  sp_sha256_init (&hash);
  while ((n = read (fd, buf, sizeof (buf))) > 0)
    sp_sha256_update (&hash, buf, (size_t)n);
  if (n < 0 || lseek (fd, 0, SEEK_SET) < 0)
    return sp_make_error (err, errno, "image: read the tar back");
  sp_sha256_final (&hash, sum);
  sp_sha256_digest_text (sum, layer);
  *out_fd = get_and_reset_fd (&fd);
  return 0;
}

/* The digest label of the image, or NULL when there is no such image; and
   its one layer, or "" when it has not exactly one.  */
static int
image_facts (const char *socket, const char *image, char **label, char **layer, sp_error_t *err)
{
  static const long ok[] = { 200, 404, 0 };
  cleanup_json struct sp_json *json = NULL;
  cleanup_free char *path = NULL;
  const struct sp_json *labels, *value, *layers;
  long status = 0;

  *label = *layer = NULL;
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
  layers = sp_json_object_get (sp_json_object_get (json, "RootFS"), "Layers");
  *label = strdup (value && value->type == SP_JSON_STRING ? value->u.string.data : "");
  *layer = strdup (layers && layers->type == SP_JSON_ARRAY && layers->u.array.len == 1
                           && layers->u.array.items[0]->type == SP_JSON_STRING
                       ? layers->u.array.items[0]->u.string.data
                       : "");
  return *label && *layer ? 0 : sp_make_error (err, ENOMEM, "allocate");
}

int
docker_image_check (const char *socket, const char *image, const char *digest, const char *layer,
                    sp_error_t *err)
{
  cleanup_free char *label = NULL;
  cleanup_free char *have = NULL;

  if (image_facts (socket, image, &label, &have, err) < 0)
    return sp_error_wrap (err, "image `%s`", image);
  if (label == NULL)
    return sp_make_error (err, 0, "image `%s` is no longer there", image);
  if (strcmp (label, digest) != 0)
    return sp_make_error (
        err, 0,
        "image `%s`: its digest label does not match the rootfs serve verified (label `%.80s`, rootfs %s); "
        "remove the image and restart",
        image, label, digest);
  /* The tag and the label say nothing of the content: the layer must be
     the digest of the rootfs's own tar.  */
  if (strcmp (have, layer) != 0)
    return sp_make_error (
        err, 0,
        "image `%s`: its layers are not the rootfs serve verified (the daemon reports `%.80s`, "
        "the rootfs's layer is %s); remove the image and restart",
        image, have[0] ? have : "not one layer", layer);
  return 0;
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
                     char **layer_out, sp_error_t *err)
{
  static const long ok[] = { 200, 0 };
  cleanup_free char *image = NULL;
  cleanup_free char *label = NULL;
  cleanup_free char *have = NULL;
  cleanup_free char *change = NULL;
  cleanup_free char *change_q = NULL;
  cleanup_free char *path = NULL;
  cleanup_close int tar_fd = -1;
  char layer[SP_DIGEST_TEXT_SIZE];
  struct docker_response r;
  const char *hex = strncmp (digest, "sha256:", 7) == 0 ? digest + 7 : NULL;

  *image_ref = *layer_out = NULL;
  if (hex == NULL || strlen (hex) != 64)
    return sp_make_error (err, 0, "image: `%s` is not a sha256 digest", digest);
  if (asprintf (&image, "%s:%.12s", DOCKER_IMAGE_REPO, hex) < 0)
    {
      image = NULL;
      return sp_make_error (err, ENOMEM, "allocate");
    }
  /* The tar is made every time: its digest is the layer the image must
     have, whether this import makes it or an earlier one did.  */
  if (tar_tree (rootfs_root, &tar_fd, layer, err) < 0)
    return -1;
  if (image_facts (socket, image, &label, &have, err) < 0)
    return sp_error_wrap (err, "image `%s`", image);
  if (label == NULL)
    {
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
    }
  if (docker_image_check (socket, image, digest, layer, err) < 0)
    return -1;
  *layer_out = strdup (layer);
  if (*layer_out == NULL)
    return sp_make_error (err, ENOMEM, "allocate");
  *image_ref = get_and_reset (&image);
  return 0;
}
