/* The verbs' option parser: see options.h.  */
#define _GNU_SOURCE
#include "proxy/options.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/bounds.h"
#include "base/cleanup.h"
#include "bundle/bundle.h"

#include "proxy/help.h"
#include "proxy/verbs.h"

int
sp_options_usage_error (const char *verb, const char *usage, const char *fmt, ...)
{
  char reason[512];
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (reason, sizeof (reason), fmt, ap);
  va_end (ap);
  sp_verb_report (verb, "%s", reason);
  fprintf (stderr, "%s\n", usage);
  return SP_EXIT_USAGE;
}

void
sp_options_print_help (const char *verb, const char *usage)
{
  const char *options = sp_proxy_help_options (verb);

  printf ("%s\n\noptions:\n%s", usage, options ? options : "");
  printf ("  --help, -h\n        Print this help, and exit 0.\n\nSee sealed-probe-proxy(8), VERBS, %s.\n",
          verb);
}

/* The option arg names, with its value when written `--name=VALUE`.  */
static const struct sp_option *
match (const char *arg, const struct sp_option *options, size_t n, const char **inline_value)
{
  for (size_t i = 0; i < n; i++)
    {
      size_t len = strlen (options[i].name);

      if (strncmp (arg, options[i].name, len) != 0)
        continue;
      if (arg[len] == '\0')
        {
          *inline_value = NULL;
          return &options[i];
        }
      if (arg[len] == '=' && options[i].flag == NULL)
        {
          *inline_value = arg + len + 1;
          return &options[i];
        }
    }
  return NULL;
}

int
sp_options_parse (const char *verb, const char *usage, int argc, char **argv, const struct sp_option *options,
                  size_t n_options)
{
  for (int i = 1; i < argc; i++)
    {
      const char *arg = argv[i];
      const char *value;
      const struct sp_option *o;

      if (strcmp (arg, "--help") == 0 || strcmp (arg, "-h") == 0)
        {
          sp_options_print_help (verb, usage);
          return -1;
        }
      o = match (arg, options, n_options, &value);
      if (o == NULL)
        return arg[0] == '-' ? sp_options_usage_error (verb, usage, "unknown option `%s`", arg)
                             : sp_options_usage_error (verb, usage, "unexpected argument `%s`", arg);
      if (o->flag)
        {
          *o->flag = 1;
          continue;
        }
      if (value == NULL)
        {
          if (i + 1 >= argc)
            return sp_options_usage_error (verb, usage, "%s needs a value", o->name);
          value = argv[++i];
        }
      if (value[0] == '\0')
        return sp_options_usage_error (verb, usage, "%s needs a non-empty value", o->name);
      if (o->value)
        {
          if (*o->value != NULL)
            return sp_options_usage_error (verb, usage, "%s given twice", o->name);
          *o->value = value;
        }
      else
        {
          if (*o->list.len == o->list.max)
            return sp_options_usage_error (verb, usage, "%s given more than %zu times", o->name, o->list.max);
          o->list.values[(*o->list.len)++] = value;
        }
    }
  return 0;
}

int
sp_options_decimal (const char *text, unsigned long max, unsigned long *out)
{
  unsigned long n = 0;

  if (text[0] < '1' || text[0] > '9')
    return -1;
  for (const char *p = text; *p; p++)
    {
      /* The digit itself may exceed a small max (5 for max 4): checked
         before max - digit, which would wrap.  */
      if (*p < '0' || *p > '9' || (unsigned long)(*p - '0') > max
          || n > (max - (unsigned long)(*p - '0')) / 10)
        return -1;
      n = n * 10 + (unsigned long)(*p - '0');
    }
  *out = n;
  return 0;
}

int
sp_options_probe_ids (const char *verb, const char *usage, const char *text, uint32_t *base)
{
  cleanup_error sp_error_t err = NULL;
  unsigned long n;

  *base = SP_PROBE_ID_BASE_DEFAULT;
  if (text == NULL)
    return 0;
  if (sp_options_decimal (text, UINT32_MAX, &n) < 0)
    return sp_options_usage_error (verb, usage, "--probe-ids: must be a decimal host id");
  if (sp_bundle_id_range_check ((uint32_t)n, &err) < 0)
    return sp_options_usage_error (verb, usage, "--probe-ids: %s", sp_error_message (err));
  *base = (uint32_t)n;
  return 0;
}

int
sp_options_binary_path (const char *verb, const char *usage, const char *option, const char *value)
{
  if (value == NULL || value[0] == '/')
    return 0;
  return sp_options_usage_error (verb, usage,
                                 "%s: `%s` is not an absolute path: give the binary's full path "
                                 "(`command -v %s` prints it)",
                                 option, value, value);
}
