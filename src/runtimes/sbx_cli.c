/* What the sbx backend reads from the sbx CLI, parsed strictly, and the
   releases it trusts (sbx_cli.h; docs/runtimes.md, "sbx").  */
#define _GNU_SOURCE
#include "runtimes/sbx_cli.h"

#include "runtimes/runtime.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"

/* Every sbx release this project has audited: a version missing here is
   refused, whatever its help text says.  To add one, check it as the
   entries below say, record what you checked, and run the matrix against
   it (docs/runtimes.md, "Adding an audited sbx release").  */
static const struct sbx_audit audited[] = {
  { "0.37.1", "2026-12-01",
    "its published reference (docs.docker.com/reference/cli/sbx): `create` has --name, --template, --cpus, "
    "--memory and --quiet, but no --network, --pids-limit, --disk-limit, --ulimit-fsize or --mount-target; "
    "`exec` has --user, --workdir and --env.  Verdict: incapable; the controls check refuses it, naming the "
    "five it lacks" },
#ifdef SP_SBX_TEST_DOUBLE
  /* Only in builds configured with -Dsbx_test_double=true (scripts/test):
     no sbx release carries this version.  */
  { "0.0.0-sealed-probe-double", "2026-12-01",
    "tests/doubles/sbx, the project's test double (not a release): emulates a capable release under runc; "
    "checked by the backend matrix on every CI run" },
#endif
};

/* The controls the adapter passes on every invocation, and why each.  */
static const struct
{
  const char *verb;
  const char *flag;
  const char *why;
} controls[] = {
  { "create", "--name", "a run-unique VM name" },
  { "create", "--template", "the template pinned by digest" },
  { "create", "--network", "no network" },
  { "create", "--cpus", "the CPU bound" },
  { "create", "--memory", "the memory bound" },
  { "create", "--pids-limit", "the task bound" },
  { "create", "--disk-limit", "the disk bound" },
  { "create", "--ulimit-fsize", "the file size bound" },
  { "create", "--mount-target", "the snapshot at /probe/repo, not at its host path" },
  { "create", "--quiet", "no progress output" },
  { "exec", "--user", "the probe as 65534, not the template's user" },
  { "exec", "--workdir", "the probe's working directory" },
  { "exec", "--env", "the bundle's fixed environment" },
};

static bool
flag_char (char c)
{
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

bool
sbx_name_valid (const char *s, size_t len)
{
  if (len == 0 || len > SBX_NAME_MAX || s[0] == '-' || s[0] == '.')
    return false;
  for (size_t i = 0; i < len; i++)
    if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9')
          || s[i] == '.' || s[i] == '+' || s[i] == '-'))
      return false;
  return true;
}

bool
sp_sbx_template_pinned (const char *ref)
{
  return sbx_template_pinned (ref);
}

bool
sbx_template_pinned (const char *ref)
{
  const char *at = ref ? strrchr (ref, '@') : NULL;

  if (at == NULL || at == ref || strncmp (at + 1, "sha256:", 7) != 0 || strlen (at + 8) != 64)
    return false;
  for (const char *p = at + 8; *p; p++)
    if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
      return false;
  /* The name: a registry path's characters, nothing that could be a flag.  */
  if (ref[0] == '-')
    return false;
  for (const char *p = ref; p < at; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' || *p == '-'
          || *p == '/' || *p == ':'))
      return false;
  return true;
}

void
sbx_list_free (char **names)
{
  for (size_t i = 0; names != NULL && names[i] != NULL; i++)
    free (names[i]);
  free (names);
}

int
sbx_list_parse (const char *out, size_t len, char ***names_out, sp_error_t *err)
{
  char **names = NULL;
  size_t n = 0, line = 0;

  *names_out = NULL;
  if (memchr (out, '\0', len) != NULL)
    return sp_make_error (err, 0, "sbx ls: its output holds a NUL byte");
  for (size_t at = 0; at < len;)
    {
      const char *nl = memchr (out + at, '\n', len - at);
      size_t end = nl ? (size_t)(nl - out) : len;
      char **grown;

      line++;
      if (!sbx_name_valid (out + at, end - at))
        {
          sbx_list_free (names);
          return sp_make_error (err, 0, "sbx ls: line %zu is not a sandbox name", line);
        }
      grown = realloc (names, (n + 2) * sizeof (*names));
      if (grown == NULL || (grown[n] = strndup (out + at, end - at)) == NULL)
        {
          sbx_list_free (grown ? grown : names);
          return sp_make_error (err, ENOMEM, "allocate");
        }
      names = grown;
      names[++n] = NULL;
      at = end + 1;
    }
  if (names == NULL && (names = calloc (1, sizeof (*names))) == NULL)
    return sp_make_error (err, ENOMEM, "allocate");
  *names_out = names;
  return 0;
}

int
sbx_version_parse (const char *out, char *version, size_t size, sp_error_t *err)
{
  unsigned found = 0;

  for (const char *p = out; *p;)
    {
      size_t line_len = strcspn (p, "\n");
      const char *q = p, *end = p + line_len;

      while (q < end && (*q == ' ' || *q == '\t'))
        q++;
      if ((size_t)(end - q) > 8 && strncmp (q, "Version:", 8) == 0)
        {
          q += 8;
          while (q < end && (*q == ' ' || *q == '\t'))
            q++;
          if (q < end && *q == 'v')
            q++;
          while (end > q && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
            end--;
          if (end == q || (size_t)(end - q) >= size)
            return sp_make_error (err, 0, "sbx version: its Version line is empty or too long");
          for (const char *c = q; c < end; c++)
            if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'z') || *c == '.' || *c == '-'
                  || *c == '+'))
              return sp_make_error (err, 0, "sbx version: its Version line is not a version");
          if (found++ == 0)
            snprintf (version, size, "%.*s", (int)(end - q), q);
        }
      p += line_len;
      if (*p == '\n')
        p++;
    }
  if (found != 1)
    return sp_make_error (err, 0, "sbx version: expected exactly one `Version:` line, found %u", found);
  return 0;
}

const struct sbx_audit *
sbx_audited (const char *version)
{
  for (size_t i = 0; i < sizeof (audited) / sizeof (audited[0]); i++)
    if (strcmp (audited[i].version, version) == 0)
      return &audited[i];
  return NULL;
}

void
sbx_audited_list (char *out, size_t size)
{
  size_t used = 0;

  out[0] = '\0';
  for (size_t i = 0; i < sizeof (audited) / sizeof (audited[0]) && used < size; i++)
    {
      int n = snprintf (out + used, size - used, "%s%s", i ? ", " : "", audited[i].version);
      if (n < 0)
        break;
      used += (size_t)n;
    }
}

/* The flag shows in text as a word of its own: `--network` but not
   `--network-alias` or `x--network`.  */
static bool
help_shows (const char *text, const char *flag)
{
  size_t n = strlen (flag);

  for (const char *p = text; (p = strstr (p, flag)) != NULL; p += n)
    if ((p == text || !flag_char (p[-1])) && !flag_char (p[n]))
      return true;
  return false;
}

unsigned
sbx_controls_missing (const char *create_help, const char *exec_help, char *missing, size_t size)
{
  unsigned count = 0;
  size_t used = strlen (missing);

  for (size_t i = 0; i < sizeof (controls) / sizeof (controls[0]); i++)
    {
      const char *text = strcmp (controls[i].verb, "create") == 0 ? create_help : exec_help;
      int n;

      if (help_shows (text, controls[i].flag))
        continue;
      count++;
      if (used >= size)
        continue;
      n = snprintf (missing + used, size - used, "%s%s %s (%s)", used ? ", " : "", controls[i].verb,
                    controls[i].flag, controls[i].why);
      if (n > 0)
        used += (size_t)n;
    }
  return count;
}
