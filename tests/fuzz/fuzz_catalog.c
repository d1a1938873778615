/* libFuzzer harness for the local-clone catalog (sp_catalog_parse: exactly
   what sp_catalog_load runs on the file's bytes), against a fixed config.
   Invariants:
   - a failure sets a one-line printable message that names the line, or
     the NUL byte;
   - a success holds one entry per line that is neither blank nor a `#`
     comment, in order, each that line exactly split at its first `=`: a
     repository name the config allows, mapped once, and an absolute path;
   - sp_catalog_lookup finds each entry's path.  */
#include <stdint.h>
#include <string.h>

#include "base/bounds.h"
#include "base/cleanup.h"
#include "base/repo_name.h"
#include "stage/catalog.h"
#include "text/config.h"

#include "fuzz.h"

static const char config_json[] = "{\"sealedProbes\": {\"enabled\": true, \"privateRepos\": "
                                  "[\"octo/hello\", \"acme/widgets\", \"a/b\", \"x-1/y.z_w\"]}}";

static const struct sp_config *
fixed_config (void)
{
  static struct sp_config *config;

  if (config == NULL)
    {
      sp_error_t err = NULL;

      FUZZ_REQUIRE (sp_config_parse (config_json, strlen (config_json), &config, &err) == 0);
    }
  return config;
}

/* Checks the entries against the lines of buf, as the parser should have
   cut them.  */
static void
check_entries (const struct sp_catalog *catalog, const struct sp_config *config, const char *buf, size_t len)
{
  size_t entry = 0;

  for (size_t pos = 0; pos < len;)
    {
      const char *line = buf + pos;
      const char *nl = memchr (line, '\n', len - pos);
      size_t ll = nl ? (size_t)(nl - line) : len - pos;
      const struct sp_catalog_entry *e;
      size_t rl, pl;
      cleanup_error sp_error_t err = NULL;

      pos += ll + 1;
      if (ll == 0 || line[0] == '#')
        continue;
      FUZZ_REQUIRE (entry < catalog->n);
      e = &catalog->entries[entry++];
      rl = strlen (e->repo);
      pl = strlen (e->path);
      FUZZ_REQUIRE (rl + 1 + pl == ll && memcmp (line, e->repo, rl) == 0 && line[rl] == '=');
      FUZZ_REQUIRE (memcmp (line + rl + 1, e->path, pl) == 0);
      FUZZ_REQUIRE (sp_repo_name_check (e->repo, rl, &err) == 0);
      FUZZ_REQUIRE (sp_config_allows_repo (config, (const uint8_t *)e->repo, rl));
      FUZZ_REQUIRE (e->path[0] == '/');
      FUZZ_REQUIRE (sp_catalog_lookup (catalog, e->repo) == e->path);
    }
  FUZZ_REQUIRE (entry == catalog->n && catalog->n <= config->n_private_repos);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  const struct sp_config *config = fixed_config ();
  struct sp_catalog catalog = { 0 };
  cleanup_free char *buf = NULL;
  sp_error_t err = NULL;

  /* sp_catalog_load reads no more than this.  */
  if (size > SP_CATALOG_MAX_BYTES)
    return 0;
  buf = fuzz_exact_copy (data, size);
  if (sp_catalog_parse (&catalog, config, "fuzz", buf, size, &err) < 0)
    {
      const char *msg = sp_error_message (err);

      FUZZ_REQUIRE (fuzz_message_ok (msg));
      FUZZ_REQUIRE (strncmp (msg, "catalog line ", 13) == 0
                    || strcmp (msg, "catalog `fuzz`: holds a NUL byte") == 0);
      FUZZ_REQUIRE (catalog.n <= config->n_private_repos);
      sp_error_release (&err);
    }
  else
    {
      FUZZ_REQUIRE (err == NULL);
      check_entries (&catalog, config, buf, size);
    }
  sp_catalog_release (&catalog);
  return 0;
}
