/* The config loader: see src/text/config.h and docs/config.md.
   Parsing (sp_config_parse) is pure; sp_config_load only adds the read.  */
#define _GNU_SOURCE
#include "text/config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/bounds.h"
#include "base/cleanup.h"
#include "base/repo_name.h"
#include "base/utf8.h"
#include "os/fileio.h"
#include "text/config_enclaves.h"
#include "text/config_entry.h"
#include "text/json.h"
#include "text/yaml_tree.h"

#define BLOCK "sealedProbes"

/* The block's name in code points, as near misses are compared.  A key one
   edit away is at most one longer, so decoding stops one past that.  */
#define BLOCK_CHARS     (sizeof (BLOCK) - 1)
#define NEAR_MISS_CHARS (BLOCK_CHARS + 2)

/* The reasons, quoted by docs/config.md and the tests.  */
#define STR_(x)         #x
#define STR(x)          STR_ (x)
#define REASON_ENABLED  "must be true or false"
#define REASON_REPOS    "must be an array of \"owner/repo\" strings"
#define REASON_RUNTIME  "must be one of \"docker\", \"gvisor\", \"sbx\", \"runc\""
#define REASON_ENTRIES  "must be an array of \"owner/repo\" strings or {\"repo\", \"sensitivity\"} objects"
#define REASON_BUDGET   "must be an integer from 1 to " STR (SP_BIT_BUDGET_MAX) " (whole bits)"
#define REASON_BUDGETS  "must be an object of \"public\", \"internal\" and \"confidential\" bit budgets"
#define REASON_SEALED   "cannot be overridden: a sealed repository never runs, so its budget is 0 bits"
#define REASON_INTERP   "must be \"python3\""
#define REASON_INVOKE   "must be an integer from " STR (SP_INVOCATIONS_MIN) " to " STR (SP_INVOCATIONS_MAX)
#define REASON_MAXREPOS "must hold at most " STR (SP_CONFIG_MAX_REPOS) " repositories"
#define REASON_SUBMODULES                                                                                    \
  "must be an object of \"omit\" and \"reject\" lists of \"owner/repo\" strings (omit: the default)"
#define REASON_NOT_LISTED "is not in " BLOCK ".privateRepos"
#define REASON_POLICY_KEY                                                                                    \
  "must be \"omit\" or \"reject\", each the key of a list of \"owner/repo\" strings "                        \
  "({\"reject\": [\"owner/repo\"]})"

static const char *const runtime_names[] = {
  [SP_RUNTIME_DOCKER] = "docker",
  [SP_RUNTIME_GVISOR] = "gvisor",
  [SP_RUNTIME_SBX] = "sbx",
  [SP_RUNTIME_RUNC] = "runc",
};

const char *
sp_runtime_name (enum sp_runtime runtime)
{
  if ((size_t)runtime < sizeof (runtime_names) / sizeof (runtime_names[0]))
    return runtime_names[runtime];
  return "unknown";
}

const char *
sp_interpreter_name (enum sp_interpreter interpreter)
{
  return interpreter == SP_INTERPRETER_PYTHON3 ? "python3" : "unknown";
}

static const char *const policy_names[] = {
  [SP_SUBMODULES_OMIT] = "omit",
  [SP_SUBMODULES_REJECT] = "reject",
};

const char *
sp_submodule_policy_name (enum sp_submodule_policy policy)
{
  if ((size_t)policy < sizeof (policy_names) / sizeof (policy_names[0]))
    return policy_names[policy];
  return "unknown";
}

void
sp_config_free (struct sp_config *config)
{
  if (config == NULL)
    return;
  for (size_t i = 0; i < config->n_private_repos; i++)
    free (config->private_repos[i]);
  free (config->private_repos);
  free (config->submodules);
  free (config->sensitivity);
  free (config->memory_limit);
  free (config);
}

bool
sp_config_allows_repo (const struct sp_config *config, const uint8_t *repo, size_t len)
{
  return sp_config_repo_index (config, repo, len) >= 0;
}

static const char *const sensitivity_names[] = {
  [SP_SENSITIVITY_NONE] = "none",         [SP_SENSITIVITY_PUBLIC] = "public",
  [SP_SENSITIVITY_INTERNAL] = "internal", [SP_SENSITIVITY_CONFIDENTIAL] = "confidential",
  [SP_SENSITIVITY_SEALED] = "sealed",
};

const char *
sp_sensitivity_name (enum sp_sensitivity s)
{
  if ((size_t)s < sizeof (sensitivity_names) / sizeof (sensitivity_names[0]))
    return sensitivity_names[s];
  return "unknown";
}

ssize_t
sp_config_repo_index (const struct sp_config *c, const uint8_t *repo, size_t len)
{
  if (c == NULL || !c->enabled || repo == NULL)
    return -1;
  for (size_t i = 0; i < c->n_private_repos; i++)
    {
      const char *r = c->private_repos[i];
      if (strlen (r) == len && memcmp (r, repo, len) == 0)
        return (ssize_t)i;
    }
  return -1;
}

bool
sp_config_repo_class_bits (const struct sp_config *c, size_t i, uint64_t *bits)
{
  enum sp_sensitivity s;

  if (c == NULL || i >= c->n_private_repos || c->sensitivity == NULL)
    return false;
  s = c->sensitivity[i];
  if (s == SP_SENSITIVITY_NONE || (size_t)s >= SP_SENSITIVITY_COUNT)
    return false;
  if (s == SP_SENSITIVITY_SEALED)
    {
      *bits = 0; /* never overridden: a sealed repository never runs */
      return true;
    }
  if (!c->class_metered[s])
    return false;
  *bits = c->class_bits[s];
  return true;
}

static int
key_error (sp_error_t *err, const char *key, const char *reason)
{
  return sp_make_error (err, 0, BLOCK ".%s: %s", key, reason);
}

static bool
is_string (const struct sp_json *v, const char *s)
{
  return v->type == SP_JSON_STRING && strcmp (v->u.string.data, s) == 0;
}

int
sp_size_text_parse (const char *s, size_t len, uint64_t min_bytes, uint64_t max_bytes, uint64_t *bytes)
{
  uint64_t n = 0;
  unsigned shift;
  bool too_big = false;

  if (len < 2 || s[0] < '1' || s[0] > '9')
    return SP_SIZE_MALFORMED;
  if (s[len - 1] == 'm' || s[len - 1] == 'M')
    shift = 20;
  else if (s[len - 1] == 'g' || s[len - 1] == 'G')
    shift = 30;
  else
    return SP_SIZE_MALFORMED;
  for (size_t i = 0; i + 1 < len; i++)
    {
      if (s[i] < '0' || s[i] > '9')
        return SP_SIZE_MALFORMED;
      /* Past the maximum the digits are still checked, so that "99x9g" is
         malformed rather than too big; the count just stops growing.  */
      if (!too_big)
        {
          n = n * 10 + (uint64_t)(s[i] - '0');
          too_big = n > (max_bytes >> shift);
        }
    }
  if (too_big)
    return SP_SIZE_ABOVE_MAX;
  n <<= shift;
  if (n < min_bytes)
    return SP_SIZE_BELOW_MIN;
  if (n > max_bytes)
    return SP_SIZE_ABOVE_MAX;
  *bytes = n;
  return SP_SIZE_OK;
}

/* privateRepos: "owner/repo" strings (no class, as before classes existed)
   or {"repo", "sensitivity"} objects, mixed freely; a name twice is refused
   whichever form each is written in.  */
static int
parse_repos (const struct sp_json *v, struct sp_config *c, sp_error_t *err)
{
  size_t n;

  if (v->type != SP_JSON_ARRAY)
    return key_error (err, "privateRepos", REASON_ENTRIES);
  n = v->u.array.len;
  if (n > SP_CONFIG_MAX_REPOS)
    return key_error (err, "privateRepos", REASON_MAXREPOS);
  if (sp_config_alloc_repos (c, n) < 0)
    return sp_make_error (err, ENOMEM, BLOCK ".privateRepos");
  for (size_t i = 0; i < n; i++)
    {
      char path[sizeof (BLOCK ".privateRepos[]") + 24];

      snprintf (path, sizeof (path), BLOCK ".privateRepos[%zu]", i);
      if (sp_config_repo_entry (v->u.array.items[i], path, true, &c->private_repos[i], &c->sensitivity[i],
                                err)
          < 0)
        return -1;
      c->n_private_repos = i + 1;
    }
  return sp_config_repo_duplicates (c->private_repos, n, BLOCK ".privateRepos", err);
}

/* A submodules list's path, "submodules.reject", for messages.  */
#define LIST_PATH_MAX 32
static void
list_path (char out[LIST_PATH_MAX], const char *policy)
{
  snprintf (out, LIST_PATH_MAX, "submodules.%s", policy);
}

/* One list of `submodules`: "owner/repo" names, as privateRepos holds
   them.  Each name is a value, so no message quotes it: a bad one may be a
   clone URL holding a token.  */
static int
check_submodule_list (const char *policy, const struct sp_json *v, sp_error_t *err)
{
  cleanup_free char **names = NULL;
  char path[LIST_PATH_MAX];
  size_t n;

  list_path (path, policy);
  if (v->type != SP_JSON_ARRAY)
    return key_error (err, path, REASON_REPOS);
  n = v->u.array.len;
  if (n > SP_CONFIG_MAX_REPOS)
    return key_error (err, path, REASON_MAXREPOS);
  names = calloc (n ? n : 1, sizeof (*names));
  if (names == NULL)
    return sp_make_error (err, ENOMEM, BLOCK ".%s", path);
  for (size_t i = 0; i < n; i++)
    {
      const struct sp_json *item = v->u.array.items[i];

      if (item->type != SP_JSON_STRING)
        return sp_make_error (err, 0, BLOCK ".%s[%zu]: must be a string \"owner/repo\"", path, i);
      if (sp_repo_name_check (item->u.string.data, item->u.string.len, err) < 0)
        return sp_error_wrap (err, BLOCK ".%s[%zu]", path, i);
      names[i] = item->u.string.data;
    }
  {
    char full[sizeof (BLOCK) + LIST_PATH_MAX];

    snprintf (full, sizeof (full), BLOCK ".%s", path);
    return sp_config_repo_duplicates (names, n, full, err);
  }
}

/* `submodules`: {"omit": [...], "reject": [...]}, either list optional.
   Checked here, in document order; that each name is one of privateRepos,
   and in one list only, is checked once the whole block is read
   (apply_submodules).  */
static int
check_submodules (const struct sp_json *v, sp_error_t *err)
{
  if (v->type != SP_JSON_OBJECT)
    return key_error (err, "submodules", REASON_SUBMODULES);
  for (size_t i = 0; i < v->u.object.len; i++)
    {
      const char *policy = v->u.object.members[i].key;

      /* Named by position, not echoed: a stray key here is most likely a
         repository name written as a key, and may be a clone URL.  */
      if (strcmp (policy, policy_names[SP_SUBMODULES_OMIT]) != 0
          && strcmp (policy, policy_names[SP_SUBMODULES_REJECT]) != 0)
        return sp_make_error (err, 0, BLOCK ".submodules: key %zu: " REASON_POLICY_KEY, i);
      if (check_submodule_list (policy, v->u.object.members[i].value, err) < 0)
        return -1;
    }
  return 0;
}

/* Gives each repository the lists name its policy.  A name that is not one
   of privateRepos is an operator error (a policy for a repository that is
   never staged is a slip, and would be void in silence), and so is a name
   in both lists.  */
static int
apply_submodules (const struct sp_json *v, struct sp_config *c, sp_error_t *err)
{
  cleanup_free const char **set_by = NULL; /* the list that named repository r, or NULL */
  cleanup_free size_t *set_at = NULL;

  if (v == NULL)
    return 0;
  set_by = calloc (c->n_private_repos ? c->n_private_repos : 1, sizeof (*set_by));
  set_at = calloc (c->n_private_repos ? c->n_private_repos : 1, sizeof (*set_at));
  if (set_by == NULL || set_at == NULL)
    return sp_make_error (err, ENOMEM, BLOCK ".submodules");
  for (size_t m = 0; m < v->u.object.len; m++)
    {
      const char *policy = v->u.object.members[m].key;
      const struct sp_json *list = v->u.object.members[m].value;

      for (size_t i = 0; i < list->u.array.len; i++)
        {
          const char *name = list->u.array.items[i]->u.string.data;
          size_t r = 0;

          while (r < c->n_private_repos && strcmp (c->private_repos[r], name) != 0)
            r++;
          if (r == c->n_private_repos)
            return sp_make_error (err, 0, BLOCK ".submodules.%s[%zu]: " REASON_NOT_LISTED, policy, i);
          if (set_by[r] != NULL)
            return sp_make_error (err, 0, BLOCK ".submodules.%s[%zu]: also in " BLOCK ".submodules.%s[%zu]",
                                  policy, i, set_by[r], set_at[r]);
          set_by[r] = policy;
          set_at[r] = i;
          c->submodules[r] = strcmp (policy, policy_names[SP_SUBMODULES_REJECT]) == 0 ? SP_SUBMODULES_REJECT
                                                                                      : SP_SUBMODULES_OMIT;
        }
    }
  return 0;
}

/* sensitivityBudgets: {"public"|"internal"|"confidential": bits}.  public
   is unmetered by default and metered once given a number; sealed is
   refused, since its 0 is what makes it never run.  */
static int
parse_budgets (const struct sp_json *v, struct sp_config *c, sp_error_t *err)
{
  if (v->type != SP_JSON_OBJECT)
    return key_error (err, "sensitivityBudgets", REASON_BUDGETS);
  for (size_t i = 0; i < v->u.object.len; i++)
    {
      const char *key = v->u.object.members[i].key;
      const struct sp_json *bits = v->u.object.members[i].value;
      int s = SP_SENSITIVITY_PUBLIC;
      int64_t n;

      while (s < SP_SENSITIVITY_COUNT && strcmp (key, sensitivity_names[s]) != 0)
        s++;
      if (s == SP_SENSITIVITY_SEALED)
        return key_error (err, "sensitivityBudgets.sealed", REASON_SEALED);
      if (s == SP_SENSITIVITY_COUNT)
        {
          cleanup_free char *quoted = sp_json_quote (key, strlen (key)); /* a key, never a value */
          if (quoted == NULL)
            return sp_make_error (err, ENOMEM, BLOCK ".sensitivityBudgets");
          return sp_make_error (err, 0, BLOCK ".sensitivityBudgets: unknown key %s (" REASON_BUDGETS ")",
                                quoted);
        }
      if (sp_json_integer (bits, 1, SP_BIT_BUDGET_MAX, &n) < 0)
        return sp_make_error (err, 0, BLOCK ".sensitivityBudgets.%s: " REASON_BUDGET, key);
      c->class_metered[s] = true;
      c->class_bits[s] = (uint64_t)n;
    }
  return 0;
}

/* What parse_member saw that is checked once the whole block is read.  */
struct block_seen
{
  bool repos;
  const struct sp_json *submodules;
};

/* One member of the block.  Every key is known; each is checked even when
   the block is disabled, so that the loader and the schema agree.  */
static int
parse_member (const char *key, const struct sp_json *v, struct sp_config *c, struct block_seen *seen,
              sp_error_t *err)
{
  int64_t n;

  if (strcmp (key, "enabled") == 0)
    {
      if (v->type != SP_JSON_BOOL)
        return key_error (err, key, REASON_ENABLED);
      c->enabled = v->u.boolean;
      return 0;
    }
  if (strcmp (key, "privateRepos") == 0)
    {
      seen->repos = true;
      return parse_repos (v, c, err);
    }
  if (strcmp (key, "submodules") == 0)
    {
      seen->submodules = v;
      return check_submodules (v, err);
    }
  if (strcmp (key, "runtime") == 0)
    {
      for (size_t i = 0; i < sizeof (runtime_names) / sizeof (runtime_names[0]); i++)
        if (is_string (v, runtime_names[i]))
          {
            c->runtime = (enum sp_runtime)i;
            return 0;
          }
      return key_error (err, key, REASON_RUNTIME);
    }
  if (strcmp (key, "timeout") == 0)
    return sp_config_timeout (v, BLOCK ".timeout", &c->timeout_seconds, err);
  if (strcmp (key, "memoryLimit") == 0)
    return sp_config_memory (v, BLOCK ".memoryLimit", &c->memory_limit_bytes, &c->memory_limit, err);
  if (strcmp (key, "sensitivityBudgets") == 0)
    return parse_budgets (v, c, err);
  if (strcmp (key, "interpreter") == 0)
    {
      if (!is_string (v, "python3"))
        return key_error (err, key, REASON_INTERP);
      c->interpreter = SP_INTERPRETER_PYTHON3;
      return 0;
    }
  if (strcmp (key, "maxInvocations") == 0)
    {
      if (sp_json_integer (v, SP_INVOCATIONS_MIN, SP_INVOCATIONS_MAX, &n) < 0)
        return key_error (err, key, REASON_INVOKE);
      c->max_invocations = (uint32_t)n;
      return 0;
    }
  {
    /* Echoing a key is fine (it is not a value), but quoted and bounded.  */
    cleanup_free char *quoted = sp_json_quote (key, strlen (key));
    if (quoted == NULL)
      return sp_make_error (err, ENOMEM, BLOCK);
    return sp_make_error (err, 0, BLOCK ": unknown key %s", quoted);
  }
}

/* Up to max code points of s[0..len), ASCII letters folded to lower case.
   A byte that is not strict UTF-8 counts as one character no text can hold
   (above U+10FFFF), so that it differs from every letter.  Returns how many
   were decoded; max when there are more.  */
static size_t
fold_code_points (const char *s, size_t len, uint32_t *out, size_t max)
{
  size_t n = 0, i = 0;

  while (i < len && n < max)
    {
      uint32_t cp;
      size_t used = sp_utf8_decode ((const uint8_t *)s + i, len - i, &cp);

      if (used == 0)
        {
          cp = 0x110000u + (uint8_t)s[i];
          used = 1;
        }
      if (cp >= 'A' && cp <= 'Z')
        cp += 'a' - 'A';
      out[n++] = cp;
      i += used;
    }
  return n;
}

static bool
same_code_points (const uint32_t *a, const uint32_t *b, size_t n)
{
  return n == 0 || memcmp (a, b, n * sizeof (*a)) == 0;
}

/* Within one insertion, deletion, substitution or adjacent swap: past the
   common prefix, what is left must match after that one edit.  */
static bool
within_one_edit (const uint32_t *a, size_t na, const uint32_t *b, size_t nb)
{
  size_t i = 0;

  if (na > nb + 1 || nb > na + 1)
    return false;
  while (i < na && i < nb && a[i] == b[i])
    i++;
  if (na == nb + 1)
    return same_code_points (a + i + 1, b + i, nb - i);
  if (nb == na + 1)
    return same_code_points (a + i, b + i + 1, na - i);
  if (i == na)
    return true;
  if (same_code_points (a + i + 1, b + i + 1, na - i - 1))
    return true;
  return i + 1 < na && a[i] == b[i + 1] && a[i + 1] == b[i]
         && same_code_points (a + i + 2, b + i + 2, na - i - 2);
}

bool
sp_config_key_is_near_miss (const char *key, size_t len)
{
  uint32_t want[NEAR_MISS_CHARS], got[NEAR_MISS_CHARS];
  size_t n_want, n_got;

  if (len == BLOCK_CHARS && memcmp (key, BLOCK, len) == 0)
    return false;
  n_want = fold_code_points (BLOCK, BLOCK_CHARS, want, NEAR_MISS_CHARS);
  n_got = fold_code_points (key, len, got, NEAR_MISS_CHARS);
  return within_one_edit (got, n_got, want, n_want);
}

/* A top-level key that is a near miss of the block is a misspelt block, not
   the host application's: ignoring it would leave sealed probes off in
   silence.  With the block beside it, which one counts is ambiguous, so
   that is refused too.  */
static int
check_near_misses (const struct sp_json *doc, bool has_block, sp_error_t *err)
{
  for (size_t i = 0; i < doc->u.object.len; i++)
    {
      const char *key = doc->u.object.members[i].key;
      cleanup_free char *quoted = NULL;

      if (!sp_config_key_is_near_miss (key, strlen (key)))
        continue;
      /* A key is echoed, never a value, and only quoted and bounded.  */
      quoted = sp_json_quote (key, strlen (key));
      if (quoted == NULL)
        return sp_make_error (err, ENOMEM, SP_JSON_ROOT_PATH);
      return sp_make_error (
          err, 0, SP_JSON_ROOT_PATH ": key %s is refused as a misspelling: did you mean \"" BLOCK "\"?%s",
          quoted,
          has_block ? " (the document holds \"" BLOCK "\" too, so which block counts is ambiguous)" : "");
    }
  return 0;
}

static void
drop_repos (struct sp_config *c)
{
  for (size_t i = 0; i < c->n_private_repos; i++)
    free (c->private_repos[i]);
  free (c->private_repos);
  free (c->submodules);
  free (c->sensitivity);
  c->private_repos = NULL;
  c->submodules = NULL;
  c->sensitivity = NULL;
  c->n_private_repos = 0;
}

enum sp_config_syntax
sp_config_syntax_for_path (const char *path)
{
  size_t n = strlen (path);

  if (n >= 5 && strcmp (path + n - 5, ".json") == 0)
    return SP_CONFIG_SYNTAX_JSON;
  if ((n >= 5 && strcmp (path + n - 5, ".yaml") == 0) || (n >= 4 && strcmp (path + n - 4, ".yml") == 0))
    return SP_CONFIG_SYNTAX_YAML;
  return SP_CONFIG_SYNTAX_SNIFF;
}

/* JSON first, then YAML, as the agent firewall reads stdin.  */
static int
parse_sniffed (const char *buf, size_t len, struct sp_json **doc, sp_error_t *err)
{
  cleanup_error sp_error_t json_err = NULL;
  cleanup_error sp_error_t yaml_err = NULL;
  bool not_json, not_yaml;

  if (sp_json_parse_checked (buf, len, SP_CONFIG_MAX_DEPTH, doc, &not_json, &json_err) == 0)
    return 0;
  if (!not_json)
    {
      *err = get_and_reset (&json_err);
      return -1;
    }
  if (sp_yaml_tree_parse (buf, len, SP_CONFIG_MAX_DEPTH, doc, &not_yaml, &yaml_err) == 0)
    return 0;
  if (!not_yaml)
    {
      *err = get_and_reset (&yaml_err);
      return -1;
    }
  /* Both messages are one line and echo no value, so neither does this.  */
  return sp_make_error (err, 0, SP_JSON_ROOT_PATH ": neither JSON (%s) nor YAML (%s)",
                        sp_error_message (json_err), sp_error_message (yaml_err));
}

static int
parse_document (const char *buf, size_t len, enum sp_config_syntax syntax, struct sp_json **doc,
                sp_error_t *err)
{
  bool not_yaml;

  switch (syntax)
    {
    case SP_CONFIG_SYNTAX_JSON:
      return sp_json_parse (buf, len, SP_CONFIG_MAX_DEPTH, doc, err);
    case SP_CONFIG_SYNTAX_YAML:
      return sp_yaml_tree_parse (buf, len, SP_CONFIG_MAX_DEPTH, doc, &not_yaml, err);
    case SP_CONFIG_SYNTAX_SNIFF:
      return parse_sniffed (buf, len, doc, err);
    default:
      return sp_make_error (err, EINVAL, "unknown config syntax %d", (int)syntax);
    }
}

int
sp_config_parse (const char *buf, size_t len, struct sp_config **out, sp_error_t *err)
{
  return sp_config_parse_syntax (buf, len, SP_CONFIG_SYNTAX_JSON, out, err);
}

/* The defaults, the firewall's where it has one (docs/config.md).  */
static struct sp_config *
new_config (void)
{
  cleanup_config struct sp_config *c = calloc (1, sizeof (*c));

  if (c == NULL)
    return NULL;
  c->form = SP_CONFIG_FORM_BLOCK;
  c->runtime = SP_RUNTIME_DOCKER;
  c->timeout_seconds = SP_TIMEOUT_DEFAULT_SECONDS;
  c->memory_limit_bytes = SP_MEMORY_DEFAULT_BYTES;
  c->memory_limit = strdup (SP_MEMORY_DEFAULT_TEXT);
  c->interpreter = SP_INTERPRETER_PYTHON3;
  c->max_invocations = SP_INVOCATIONS_DEFAULT;
  c->max_script_bytes = SP_SCRIPT_MAX_BYTES;
  /* The firewall's ENCLAVE_SENSITIVITY_RUN_BITS: public unmetered.  */
  c->class_metered[SP_SENSITIVITY_INTERNAL] = true;
  c->class_bits[SP_SENSITIVITY_INTERNAL] = SP_SENSITIVITY_INTERNAL_BITS;
  c->class_metered[SP_SENSITIVITY_CONFIDENTIAL] = true;
  c->class_bits[SP_SENSITIVITY_CONFIDENTIAL] = SP_SENSITIVITY_CONFIDENTIAL_BITS;
  c->class_metered[SP_SENSITIVITY_SEALED] = true;
  c->class_bits[SP_SENSITIVITY_SEALED] = 0;
  if (c->memory_limit == NULL)
    return NULL;
  return get_and_reset (&c);
}

/* The block, when the document has one.  Every key is checked even when the
   block is disabled, so that the loader and the schema agree.  */
static int
read_block (const struct sp_json *block, struct sp_config *c, sp_error_t *err)
{
  struct block_seen seen = { 0 };

  if (block != NULL)
    {
      if (block->type != SP_JSON_OBJECT)
        return sp_make_error (err, 0, BLOCK ": must be an object");
      for (size_t i = 0; i < block->u.object.len; i++)
        if (parse_member (block->u.object.members[i].key, block->u.object.members[i].value, c, &seen, err)
            < 0)
          return -1;
    }
  if (c->enabled && !seen.repos)
    return sp_make_error (err, 0, BLOCK ".privateRepos: required when enabled is true");
  if (c->enabled && c->n_private_repos == 0)
    return sp_make_error (err, 0, BLOCK ".privateRepos: must not be empty when enabled is true");
  if (apply_submodules (seen.submodules, c, err) < 0)
    return -1;
  if (!c->enabled)
    drop_repos (c); /* nothing is enabled, so nothing is allowed */
  return 0;
}

int
sp_config_parse_syntax (const char *buf, size_t len, enum sp_config_syntax syntax, struct sp_config **out,
                        sp_error_t *err)
{
  cleanup_json struct sp_json *doc = NULL;
  cleanup_config struct sp_config *c = NULL;
  const struct sp_json *block, *enclaves;

  *out = NULL;
  if (parse_document (buf, len, syntax, &doc, err) < 0)
    return -1;
  if (doc->type != SP_JSON_OBJECT)
    return sp_make_error (err, 0, SP_JSON_ROOT_PATH ": must be an object");
  c = new_config ();
  if (c == NULL)
    return sp_make_error (err, ENOMEM, "allocate the config");

  /* Other top-level keys are the host application's business, all but a
     misspelt block, which is refused before the block is read.  */
  block = sp_json_object_get (doc, BLOCK);
  enclaves = sp_json_object_get (doc, SP_CONFIG_ENCLAVES_KEY);
  c->has_block = block != NULL;
  if (check_near_misses (doc, c->has_block, err) < 0)
    return -1;
  /* The firewall refuses a document with sealedProbes; which of the two
     would count here is as ambiguous.  */
  if (block != NULL && enclaves != NULL)
    return sp_make_error (err, 0,
                          SP_JSON_ROOT_PATH ": holds both \"" BLOCK "\" and \"" SP_CONFIG_ENCLAVES_KEY
                                            "\": write one (which would count is ambiguous)");
  if (enclaves != NULL)
    {
      if (sp_config_read_enclaves (enclaves, c, err) < 0)
        return -1;
    }
  else if (read_block (block, c, err) < 0)
    return -1;

  *out = get_and_reset (&c);
  return 0;
}

int
sp_config_load (const char *path, struct sp_config **out, sp_error_t *err)
{
  cleanup_free char *buf = NULL;
  size_t len = 0;

  *out = NULL;
  if (sp_read_path_capped (path, SP_CONFIG_MAX_BYTES, &buf, &len, err) < 0)
    return -1;
  return sp_config_parse_syntax (buf, len, sp_config_syntax_for_path (path), out, err);
}
