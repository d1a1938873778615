/* sealed-probe-proxy config --config PATH|-: validates the config and prints
   the effective settings as one JSON line.  See docs/config.md.  */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/bounds.h"
#include "base/cleanup.h"
#include "os/fileio.h"
#include "text/config.h"
#include "text/yajl_util.h"

#include "proxy/options.h"
#include "proxy/verbs.h"

#define USAGE "usage: sealed-probe-proxy config --config PATH|-"

/* Bad usage: the reason, then the usage line, and exit status 2.  */
#define usage_error(...) (sp_verb_report ("config", __VA_ARGS__), fputs (USAGE "\n", stderr), SP_EXIT_USAGE)

static yajl_gen_status
gen_key (yajl_gen g, const char *s)
{
  return yajl_gen_string (g, (const unsigned char *)s, strlen (s));
}

/* Every repository in the list of its class, NONE ("none") included, and
   each class's budget (null: unmetered): what serve charges, the same for
   both forms of the config.  */
static unsigned
render_sensitivity (const struct sp_config *c, yajl_gen g)
{
  unsigned st = 0;

  st |= gen_key (g, "sensitivity");
  st |= yajl_gen_map_open (g);
  for (int s = SP_SENSITIVITY_NONE; s < SP_SENSITIVITY_COUNT; s++)
    {
      st |= gen_key (g, sp_sensitivity_name ((enum sp_sensitivity)s));
      st |= yajl_gen_array_open (g);
      for (size_t i = 0; i < c->n_private_repos; i++)
        if ((int)c->sensitivity[i] == s)
          st |= gen_key (g, c->private_repos[i]);
      st |= yajl_gen_array_close (g);
    }
  st |= yajl_gen_map_close (g);
  st |= gen_key (g, "sensitivityBudgets");
  st |= yajl_gen_map_open (g);
  for (int s = SP_SENSITIVITY_PUBLIC; s < SP_SENSITIVITY_COUNT; s++)
    {
      st |= gen_key (g, sp_sensitivity_name ((enum sp_sensitivity)s));
      st |= c->class_metered[s] ? yajl_gen_integer (g, (long long)c->class_bits[s]) : yajl_gen_null (g);
    }
  st |= yajl_gen_map_close (g);
  return st;
}

_Static_assert(SP_SANDBOX_CPU_QUOTA_US == SP_SANDBOX_CPU_PERIOD_US, "cpuLimit is printed as \"1\": one CPU");

/* The limits this proxy fixes for every sandbox, which an enclaves
   document may ask for only as loosely or more (config_enclaves.h).  */
static unsigned
render_fixed (const struct sp_config *c, yajl_gen g)
{
  unsigned st = 0;

  st |= gen_key (g, "maxScriptBytes");
  st |= yajl_gen_integer (g, (long long)c->max_script_bytes);
  st |= gen_key (g, "maxOutputBytes");
  st |= yajl_gen_integer (g, SP_ANSWER_OUTPUT_MAX_BYTES);
  st |= gen_key (g, "pidsLimit");
  st |= yajl_gen_integer (g, SP_SANDBOX_PIDS_MAX);
  st |= gen_key (g, "cpuLimit");
  st |= gen_key (g, "1");
  st |= gen_key (g, "tmpfsLimit");
  st |= gen_key (g, SP_SANDBOX_TMP_SIZE);
  return st;
}

/* Every yajl_gen call's status is OR-ed together: yajl_gen_status_ok is 0.  */
static int
render (const struct sp_config *c, yajl_gen g)
{
  unsigned st = 0;

  st |= yajl_gen_map_open (g);
  st |= gen_key (g, "enabled");
  st |= yajl_gen_bool (g, c->enabled);
  /* The firewall's config may lack the block: still valid, but said, so
     that "no block" is never read as "enabled: false".  */
  if (!c->has_block)
    {
      st |= gen_key (g, "block");
      st |= gen_key (g, "absent");
    }
  if (c->enabled)
    {
      st |= gen_key (g, "privateRepos");
      st |= yajl_gen_array_open (g);
      for (size_t i = 0; i < c->n_private_repos; i++)
        st |= gen_key (g, c->private_repos[i]);
      st |= yajl_gen_array_close (g);
      st |= gen_key (g, "runtime");
      st |= gen_key (g, sp_runtime_name (c->runtime));
      st |= gen_key (g, "timeout");
      st |= yajl_gen_integer (g, c->timeout_seconds);
      st |= gen_key (g, "memoryLimit");
      st |= gen_key (g, c->memory_limit);
      st |= gen_key (g, "memoryLimitBytes");
      st |= yajl_gen_integer (g, (long long)c->memory_limit_bytes);
      st |= gen_key (g, "interpreter");
      st |= gen_key (g, sp_interpreter_name (c->interpreter));
      st |= gen_key (g, "maxInvocations");
      st |= yajl_gen_integer (g, c->max_invocations);
      /* Every repository in the list of its policy, the default's too: what
         stage will do, in the form the block takes.  */
      st |= gen_key (g, "submodules");
      st |= yajl_gen_map_open (g);
      for (int p = SP_SUBMODULES_OMIT; p <= SP_SUBMODULES_REJECT; p++)
        {
          st |= gen_key (g, sp_submodule_policy_name ((enum sp_submodule_policy)p));
          st |= yajl_gen_array_open (g);
          for (size_t i = 0; i < c->n_private_repos; i++)
            if ((int)c->submodules[i] == p)
              st |= gen_key (g, c->private_repos[i]);
          st |= yajl_gen_array_close (g);
        }
      st |= yajl_gen_map_close (g);
      st |= render_sensitivity (c, g);
      st |= render_fixed (c, g);
      st |= gen_key (g, "form");
      st |= gen_key (g, c->form == SP_CONFIG_FORM_ENCLAVES ? "enclaves" : "sealedProbes");
    }
  st |= yajl_gen_map_close (g);
  return st == yajl_gen_status_ok ? 0 : -1;
}

int
sp_verb_load_enabled_config (const char *verb, const char *path, struct sp_config **config)
{
  cleanup_error sp_error_t err = NULL;

  if (sp_config_load (path, config, &err) < 0)
    {
      sp_verb_report (verb, "%s: %s", path, sp_error_message (err));
      return -1;
    }
  if (!(*config)->has_block)
    sp_verb_report (
        verb,
        "%s: sealedProbes: is absent (the document has no such top-level key), so sealed probes are off",
        path);
  else if (!(*config)->enabled)
    sp_verb_report (verb, "%s: sealedProbes.enabled: is false, so sealed probes are off", path);
  else
    return 0;
  sp_config_free (*config);
  *config = NULL;
  return -1;
}

int
sp_verb_config (int argc, char **argv)
{
  cleanup_error sp_error_t err = NULL;
  cleanup_config struct sp_config *config = NULL;
  cleanup_yajl_gen yajl_gen g = NULL;
  const char *path = NULL;
  const unsigned char *out;
  size_t out_len;

  for (int i = 1; i < argc; i++)
    {
      const char *arg = argv[i];

      if (strcmp (arg, "--help") == 0 || strcmp (arg, "-h") == 0)
        {
          sp_options_print_help ("config", USAGE);
          return SP_EXIT_OK;
        }
      if (path != NULL)
        return usage_error ("unexpected argument `%s`", arg);
      if (strcmp (arg, "--config") == 0)
        {
          if (i + 1 >= argc)
            return usage_error ("%s needs a value", arg);
          path = argv[++i];
        }
      else if (strncmp (arg, "--config=", 9) == 0)
        path = arg + 9;
      else if (arg[0] == '-')
        return usage_error ("unknown option `%s`", arg);
      else
        return usage_error ("unexpected argument `%s`", arg);
      if (path[0] == '\0')
        return usage_error ("%s needs a non-empty value", "--config");
    }
  if (path == NULL)
    return usage_error ("%s is required", "--config");

  if (sp_config_load (path, &config, &err) < 0)
    {
      sp_verb_report ("config", "%s", sp_error_message (err));
      return SP_EXIT_FAIL;
    }

  g = yajl_gen_alloc (NULL);
  if (g == NULL || render (config, g) < 0 || yajl_gen_get_buf (g, &out, &out_len) != yajl_gen_status_ok)
    {
      sp_verb_report ("config", "cannot render the effective settings");
      return SP_EXIT_FAIL;
    }
  if (sp_write_all (STDOUT_FILENO, out, out_len, &err) < 0 || sp_write_all (STDOUT_FILENO, "\n", 1, &err) < 0)
    {
      sp_verb_report ("config", "standard output: %s", sp_error_message (err));
      return SP_EXIT_FAIL;
    }
  return SP_EXIT_OK;
}
