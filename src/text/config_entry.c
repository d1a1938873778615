/* The checks both forms of the config share: see src/text/config_entry.h.  */
#define _GNU_SOURCE
#include "text/config_entry.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/bounds.h"
#include "base/cleanup.h"
#include "base/repo_name.h"

/* The reasons, quoted by docs/config.md and the tests.  */
#define STR_(x) #x
#define STR(x)  STR_ (x)
#define REASON_TIMEOUT                                                                                       \
  "must be an integer from " STR (SP_TIMEOUT_MIN_SECONDS) " to " STR (SP_TIMEOUT_MAX_SECONDS)
#define REASON_TIMEOUT_MAX                                                                                   \
  "must be at most " STR (                                                                                   \
      SP_TIMEOUT_MAX_SECONDS) " seconds: this proxy's bound, tighter than the "                              \
                              "firewall's, because a probe holds a sandbox slot for its "                    \
                              "whole timeout"
#define REASON_MEMORY                                                                                        \
  "must be a string of digits then \"m\", \"M\", \"g\" or \"G\", from \"64m\" to \"8g\" (no leading zeros)"
#define REASON_MEMORY_MIN                                                                                    \
  "must be at least \"64m\": this proxy's bound, tighter than the firewall's, leaving python3 room "         \
  "on every backend (gVisor charges its own kernel to the same limit)"
#define REASON_MEMORY_MAX "must be at most \"8g\": this proxy's bound on one sandbox"
#define REASON_ENTRY      "must be a string \"owner/repo\" or an object {\"repo\", \"sensitivity\"}"
#define REASON_OBJECT     "must be an object {\"repo\": \"owner/repo\", \"sensitivity\": ...}"
#define REASON_CLASS      "must be one of \"public\", \"internal\", \"confidential\", \"sealed\""

static int
parse_sensitivity (const struct sp_json *v, const char *path, enum sp_sensitivity *out, sp_error_t *err)
{
  if (v->type == SP_JSON_STRING)
    for (int s = SP_SENSITIVITY_PUBLIC; s <= SP_SENSITIVITY_SEALED; s++)
      if (strcmp (v->u.string.data, sp_sensitivity_name ((enum sp_sensitivity)s)) == 0)
        {
          *out = (enum sp_sensitivity)s;
          return 0;
        }
  return sp_make_error (err, 0, "%s.sensitivity: " REASON_CLASS, path);
}

static int
repo_name (const struct sp_json *v, const char *path, const char *suffix, char **name, sp_error_t *err)
{
  if (v->type != SP_JSON_STRING)
    return sp_make_error (err, 0, "%s%s: must be a string \"owner/repo\"", path, suffix);
  if (sp_repo_name_check (v->u.string.data, v->u.string.len, err) < 0)
    return sp_error_wrap (err, "%s%s", path, suffix);
  *name = strdup (v->u.string.data);
  if (*name == NULL)
    return sp_make_error (err, ENOMEM, "%s", path);
  return 0;
}

/* Exactly "repo" and "sensitivity": a third key is most likely a typo of
   one of them, and a missing class would leave the repository unmetered.  */
static int
repo_object (const struct sp_json *item, const char *path, char **name, enum sp_sensitivity *sensitivity,
             sp_error_t *err)
{
  const struct sp_json *repo = sp_json_object_get (item, "repo");
  const struct sp_json *cls = sp_json_object_get (item, "sensitivity");

  for (size_t i = 0; i < item->u.object.len; i++)
    {
      const char *key = item->u.object.members[i].key;
      cleanup_free char *quoted = NULL;

      if (strcmp (key, "repo") == 0 || strcmp (key, "sensitivity") == 0)
        continue;
      quoted = sp_json_quote (key, strlen (key)); /* a key, quoted and bounded; never a value */
      if (quoted == NULL)
        return sp_make_error (err, ENOMEM, "%s", path);
      return sp_make_error (err, 0, "%s: unknown key %s (" REASON_OBJECT ")", path, quoted);
    }
  if (repo == NULL)
    return sp_make_error (err, 0, "%s.repo: required", path);
  if (cls == NULL)
    return sp_make_error (err, 0, "%s.sensitivity: required (" REASON_CLASS ")", path);
  if (parse_sensitivity (cls, path, sensitivity, err) < 0)
    return -1;
  return repo_name (repo, path, ".repo", name, err);
}

int
sp_config_repo_entry (const struct sp_json *item, const char *path, bool string_allowed, char **name,
                      enum sp_sensitivity *sensitivity, sp_error_t *err)
{
  *name = NULL;
  *sensitivity = SP_SENSITIVITY_NONE;
  if (item->type == SP_JSON_OBJECT)
    return repo_object (item, path, name, sensitivity, err);
  if (!string_allowed)
    return sp_make_error (err, 0, "%s: " REASON_OBJECT, path);
  if (item->type != SP_JSON_STRING)
    return sp_make_error (err, 0, "%s: " REASON_ENTRY, path);
  return repo_name (item, path, "", name, err);
}

int
sp_config_alloc_repos (struct sp_config *c, size_t n)
{
  c->private_repos = calloc (n ? n : 1, sizeof (*c->private_repos));
  c->submodules = calloc (n ? n : 1, sizeof (*c->submodules));
  c->sensitivity = calloc (n ? n : 1, sizeof (*c->sensitivity));
  return c->private_repos && c->submodules && c->sensitivity ? 0 : -1;
}

static int
compare_repo_ptrs (const void *a, const void *b)
{
  const char *const *ra = *(const char *const *const *)a;
  const char *const *rb = *(const char *const *const *)b;
  int r = strcmp (*ra, *rb);

  if (r != 0)
    return r;
  return (ra > rb) - (ra < rb); /* same array: document order */
}

/* Sorting pointers into the list keeps this O(n log n) and still lets the
   message name both indexes.  */
int
sp_config_repo_duplicates (char **repos, size_t n, const char *path, sp_error_t *err)
{
  cleanup_free char ***sorted = NULL;
  char **later = NULL, **earlier = NULL;

  if (n < 2)
    return 0;
  sorted = calloc (n, sizeof (*sorted));
  if (sorted == NULL)
    return sp_make_error (err, ENOMEM, "%s", path);
  for (size_t i = 0; i < n; i++)
    sorted[i] = &repos[i];
  qsort (sorted, n, sizeof (*sorted), compare_repo_ptrs);
  for (size_t i = 0; i + 1 < n; i++)
    if (strcmp (*sorted[i], *sorted[i + 1]) == 0 && (later == NULL || sorted[i + 1] < later))
      {
        /* Only the first pair of a run can lower `later`, so sorted[i] is
           the first occurrence.  */
        later = sorted[i + 1];
        earlier = sorted[i];
      }
  if (later == NULL)
    return 0;
  return sp_make_error (err, 0, "%s[%zu]: duplicate of %s[%zu]", path, (size_t)(later - repos), path,
                        (size_t)(earlier - repos));
}

bool
sp_config_integer_above (const struct sp_json *v, int64_t max)
{
  const char *p;
  int64_t n;

  if (v->type != SP_JSON_NUMBER || v->u.number == NULL)
    return false;
  if (sp_json_integer (v, max + 1, INT64_MAX, &n) == 0)
    return true;
  p = v->u.number;
  if (*p < '1' || *p > '9')
    return false;
  for (; *p; p++)
    if (*p < '0' || *p > '9')
      return false;
  return strlen (v->u.number) > 18; /* beyond int64, so above any max */
}

int
sp_config_timeout (const struct sp_json *v, const char *path, uint32_t *seconds, sp_error_t *err)
{
  int64_t n;

  if (sp_json_integer (v, SP_TIMEOUT_MIN_SECONDS, SP_TIMEOUT_MAX_SECONDS, &n) < 0)
    return sp_make_error (err, 0, "%s: %s", path,
                          sp_config_integer_above (v, SP_TIMEOUT_MAX_SECONDS) ? REASON_TIMEOUT_MAX
                                                                              : REASON_TIMEOUT);
  *seconds = (uint32_t)n;
  return 0;
}

int
sp_config_memory (const struct sp_json *v, const char *path, uint64_t *bytes, char **text, sp_error_t *err)
{
  char *copy;
  int verdict = SP_SIZE_MALFORMED;

  if (v->type == SP_JSON_STRING)
    verdict = sp_size_text_parse (v->u.string.data, v->u.string.len, SP_MEMORY_MIN_BYTES, SP_MEMORY_MAX_BYTES,
                                  bytes);
  switch (verdict)
    {
    case SP_SIZE_OK:
      break;
    case SP_SIZE_BELOW_MIN:
      return sp_make_error (err, 0, "%s: " REASON_MEMORY_MIN, path);
    case SP_SIZE_ABOVE_MAX:
      return sp_make_error (err, 0, "%s: " REASON_MEMORY_MAX, path);
    default:
      return sp_make_error (err, 0, "%s: " REASON_MEMORY, path);
    }
  copy = strdup (v->u.string.data);
  if (copy == NULL)
    return sp_make_error (err, ENOMEM, "%s", path);
  free (*text);
  *text = copy;
  return 0;
}
