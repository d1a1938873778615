/* The local-clone catalog: see catalog.h.  */
#define _GNU_SOURCE
#include "stage/catalog.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/bounds.h"
#include "base/cleanup.h"
#include "base/repo_name.h"
#include "os/fileio.h"

int
sp_catalog_add (struct sp_catalog *catalog, const struct sp_config *config, const char *spec,
                const char *origin, sp_error_t *err)
{
  cleanup_error sp_error_t name_err = NULL;
  const char *eq = strchr (spec, '=');
  cleanup_free char *repo = NULL;
  cleanup_free char *path = NULL;
  struct sp_catalog_entry *grown;

  if (eq == NULL)
    return sp_make_error (err, 0, "%s: expected OWNER/REPO=PATH", origin);
  repo = strndup (spec, (size_t)(eq - spec));
  path = strdup (eq + 1);
  if (repo == NULL || path == NULL)
    return sp_make_error (err, ENOMEM, "%s", origin);
  if (sp_repo_name_check (repo, strlen (repo), &name_err) < 0)
    return sp_make_error (err, 0, "%s: repository: %s", origin, sp_error_message (name_err));
  if (!sp_config_allows_repo (config, (const uint8_t *)repo, strlen (repo)))
    return sp_make_error (err, 0, "%s: `%s` is not one of sealedProbes.privateRepos", origin, repo);
  if (sp_catalog_lookup (catalog, repo) != NULL)
    return sp_make_error (err, 0, "%s: `%s` is mapped twice", origin, repo);
  if (path[0] != '/')
    return sp_make_error (err, 0, "%s: the clone path for `%s` must be absolute", origin, repo);

  grown = reallocarray (catalog->entries, catalog->n + 1, sizeof (*grown));
  if (grown == NULL)
    return sp_make_error (err, ENOMEM, "%s", origin);
  catalog->entries = grown;
  catalog->entries[catalog->n].repo = get_and_reset (&repo);
  catalog->entries[catalog->n].path = get_and_reset (&path);
  catalog->n++;
  return 0;
}

int
sp_catalog_parse (struct sp_catalog *catalog, const struct sp_config *config, const char *name,
                  const char *buf, size_t len, sp_error_t *err)
{
  cleanup_free char *text = NULL;
  char *line, *next;
  unsigned lineno = 0;

  if (len > 0 && memchr (buf, '\0', len) != NULL)
    return sp_make_error (err, 0, "catalog `%s`: holds a NUL byte", name);
  /* A NUL-terminated copy, cut into lines in place.  */
  text = strndup (buf, len);
  if (text == NULL)
    return sp_make_error (err, ENOMEM, "catalog `%s`", name);
  for (line = text; line != NULL && *line != '\0'; line = next)
    {
      char origin[64];

      next = strchr (line, '\n');
      if (next)
        *next++ = '\0';
      lineno++;
      if (line[0] == '\0' || line[0] == '#')
        continue;
      snprintf (origin, sizeof (origin), "catalog line %u", lineno);
      if (sp_catalog_add (catalog, config, line, origin, err) < 0)
        return -1;
    }
  return 0;
}

int
sp_catalog_load (struct sp_catalog *catalog, const struct sp_config *config, const char *path,
                 sp_error_t *err)
{
  cleanup_free char *text = NULL;
  size_t len;

  if (sp_read_path_capped (path, SP_CATALOG_MAX_BYTES, &text, &len, err) < 0)
    return sp_error_wrap (err, "catalog");
  return sp_catalog_parse (catalog, config, path, text, len, err);
}

const char *
sp_catalog_lookup (const struct sp_catalog *catalog, const char *repo)
{
  for (size_t i = 0; i < catalog->n; i++)
    if (strcmp (catalog->entries[i].repo, repo) == 0)
      return catalog->entries[i].path;
  return NULL;
}

void
sp_catalog_release (struct sp_catalog *catalog)
{
  for (size_t i = 0; i < catalog->n; i++)
    {
      free (catalog->entries[i].repo);
      free (catalog->entries[i].path);
    }
  free (catalog->entries);
  catalog->entries = NULL;
  catalog->n = 0;
}
