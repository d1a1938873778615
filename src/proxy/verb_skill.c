/* sealed-probe-proxy skill --config PATH|- [--out FILE]: writes the
   agent-facing SKILL.md for the configured repositories.  It is guidance for
   the agent, never a security boundary: the proxy enforces every rule the
   file states.  See docs/skill.md.  */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/bounds.h"
#include "base/cleanup.h"
#include "os/fileio.h"
#include "text/config.h"

#include "proxy/options.h"
#include "proxy/verbs.h"

#define USAGE "usage: sealed-probe-proxy skill --config PATH|- [--out FILE]"

#define fail(...) (sp_verb_report ("skill", __VA_ARGS__), SP_EXIT_FAIL)

/* The worked example.  tests/skill/test_skill.py extracts it from the
   generated file and runs it, so it must stay a complete, working script.  */
static const char example_script[]
    = "# Does any Python file in the repository still import `old_api`?\n"
      "# Outcomes: YES, NO, UNKNOWN.  The working directory is /probe/repo.\n"
      "import json\n"
      "import os\n"
      "import re\n"
      "\n"
      "IMPORT = re.compile(r\"^\\s*(import|from)\\s+old_api\\b\", re.MULTILINE)\n"
      "\n"
      "\n"
      "def answer():\n"
      "    for root, dirs, files in os.walk(\".\"):\n"
      "        dirs[:] = [d for d in dirs if d != \".git\"]\n"
      "        for name in files:\n"
      "            if name.endswith(\".py\"):\n"
      "                with open(os.path.join(root, name), encoding=\"utf-8\", errors=\"replace\") as f:\n"
      "                    if IMPORT.search(f.read()):\n"
      "                        return \"YES\"\n"
      "    return \"NO\"\n"
      "\n"
      "\n"
      "try:\n"
      "    result = answer()\n"
      "except Exception:\n"
      "    result = \"UNKNOWN\"  # could not tell: an unreadable file, say\n"
      "\n"
      "with open(\"/probe/out\", \"w\", encoding=\"utf-8\") as out:\n"
      "    json.dump({\"result\": result}, out)\n";

/* The memory limit in words: "512m" reads "512 MiB", "2G" reads "2 GiB".
   The config text is already validated as digits then 'm', 'M', 'g' or 'G'.  */
static void
print_memory (FILE *f, const struct sp_config *c)
{
  size_t n = strlen (c->memory_limit);

  fprintf (f, "%.*s %s (%llu bytes)", (int)(n - 1), c->memory_limit,
           tolower ((unsigned char)c->memory_limit[n - 1]) == 'g' ? "GiB" : "MiB",
           (unsigned long long)c->memory_limit_bytes);
}

static void
render (FILE *f, const struct sp_config *c)
{
  fputs ("---\n"
         "name: sealed-probe\n"
         "description: Answer one multiple-choice question about a private repository you cannot read, by "
         "running a small Python script against it in a sealed sandbox.\n"
         "---\n\n",
         f);

  fputs ("# sealed-probe\n\n"
         "## What a sealed probe is\n\n"
         "Some repositories are private to you: you may not read them, clone them or see their files. "
         "A sealed probe lets you learn one small fact about one of them anyway. You write a short "
         "Python script and name three possible answers. A trusted proxy runs the script against a "
         "fresh, throwaway copy of the repository inside a sandbox with no network and no credentials, "
         "and gives you back exactly one of your three answers, or `ERROR`. Nothing else comes back: "
         "no output, no exit status, no error text.\n\n",
         f);

  fputs ("## Repositories you can probe\n\n", f);
  for (size_t i = 0; i < c->n_private_repos; i++)
    fprintf (f, "- `%s`\n", c->private_repos[i]);
  fputs ("\nAny other repository name gives `ERROR`. Names are exact: lowercase `owner/name`, "
         "with no URL and no `.git`.\n\n",
         f);

  fputs ("## How to call it\n\n"
         "```sh\n"
         "sealed-probe --repo OWNER/NAME --outcome A --outcome B --outcome C < probe.py\n"
         "```\n\n"
         "It prints exactly one line, such as `{\"result\":\"B\"}`, and always exits 0. The script "
         "is read from standard input. Give `--repo` once and `--outcome` exactly three times; "
         "the outcomes keep their order.\n\n",
         f);

  fprintf (f,
           "## Choosing the three outcomes\n\n"
           "- Exactly three, all different.\n"
           "- Each is non-empty and at most %d bytes of UTF-8, with no control characters "
           "(no newlines, tabs, or invisible direction marks).\n"
           "- None may be `ERROR`: that answer is reserved for failures.\n"
           "- Make them mutually exclusive and together exhaustive, so that every state of the "
           "repository maps to exactly one. For example `YES` / `NO` / `UNKNOWN`.\n"
           "- Keep one for \"couldn't tell\" (`UNKNOWN` above), and have the script write it when "
           "it cannot decide, rather than crash.\n\n",
           SP_OUTCOME_MAX_BYTES);

  fprintf (f,
           "## The script\n\n"
           "- Python 3.11, standard library only. It runs as `python3 -I -S -B /probe/probe.py`, "
           "with the working directory `/probe/repo`.\n"
           "- `/probe/repo` is a writable, throwaway copy of the repository. Change it freely; "
           "nothing you change is kept.\n"
           "- Submodules are not included. A submodule's directory in `/probe/repo` is there but "
           "empty, and `.gitmodules`, when the repository has one, is there as committed (it says where "
           "they are); nothing it points to was fetched. A question that needs a submodule's files "
           "cannot be answered: have the script write your \"couldn't tell\" outcome.\n"
           "- There is no network and there are no credentials.\n"
           "- Standard output and standard error are discarded: printing tells you nothing.\n"
           "- Timeout: %u seconds of wall-clock time. Memory limit: ",
           (unsigned)c->timeout_seconds);
  print_memory (f, c);
  fprintf (f,
           ".\n"
           "- The script is at most %d bytes (%d KiB).\n\n",
           SP_SCRIPT_MAX_BYTES, SP_SCRIPT_MAX_BYTES / 1024);

  fputs ("## The answer\n\n"
         "Write exactly this JSON document to `/probe/out`, with one of your three outcomes:\n\n"
         "```json\n"
         "{\"result\": \"<one of your outcomes>\"}\n"
         "```\n\n"
         "`json.dump({\"result\": answer}, f)` writes it correctly. Anything else gives `ERROR`: "
         "another key, a second document, a value that is not exactly one of your outcomes (no "
         "trimming, no case folding), a crash, a timeout, or no write at all.\n\n",
         f);

  fprintf (f, "## A complete example\n\n```python\n%s```\n\nCall it with:\n\n", example_script);
  fprintf (f,
           "```sh\nsealed-probe --repo %s --outcome YES --outcome NO --outcome UNKNOWN < probe.py\n```\n\n",
           c->private_repos[0]);

  fprintf (f,
           "## What comes back, and what it costs\n\n"
           "- Exactly one of four symbols: one of your three outcomes, or `ERROR`. That is at most "
           "2 bits per call.\n"
           "- `ERROR` carries no detail. You cannot tell a crash from a timeout from a malformed "
           "answer from a refused request. Running the same script again gives the same answer, "
           "so do not retry it: fix the script instead (catch exceptions and write your "
           "\"couldn't tell\" outcome).\n"
           "- Every call, `ERROR` included, spends one of a limited budget of %u calls. Ask "
           "precise questions and make each one count.\n"
           "- The operator may also cap the bits your calls can carry, per repository and for "
           "all repositories together. Once a cap is reached, every further call gives `ERROR`.\n\n",
           (unsigned)c->max_invocations);

  fputs ("## This file is guidance\n\n"
         "This file explains how to use the tool well. It is not a security boundary: the proxy "
         "enforces every limit above, whatever a script or a request tries.\n",
         f);
}

/* Writes buf to path atomically with mode 0644, for agents to read.  */
static int
write_out (const char *path, const char *buf, size_t len, sp_error_t *err)
{
  cleanup_free char *dir = NULL;
  cleanup_close int dirfd = -1;
  const char *base;
  struct stat st;

  if (sp_path_split (path, &dir, &base, err) < 0)
    return -1;
  dirfd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0)
    return sp_make_error (err, errno, "`%s`: its directory", path);
  if (fstatat (dirfd, base, &st, 0) == 0 && S_ISDIR (st.st_mode))
    return sp_make_error (err, 0, "`%s` is a directory; name a file", path);
  return sp_write_file_atomic_at (dirfd, base, buf, len, 0644, err);
}

int
sp_verb_skill (int argc, char **argv)
{
  cleanup_error sp_error_t err = NULL;
  cleanup_config struct sp_config *config = NULL;
  cleanup_free char *text = NULL;
  const char *config_path = NULL, *out = NULL;
  const struct sp_option options[] = {
    { .name = "--config", .value = &config_path },
    { .name = "--out", .value = &out },
  };
  size_t len = 0;
  FILE *f;
  int ret;

  ret = sp_options_parse ("skill", USAGE, argc, argv, options, sizeof (options) / sizeof (options[0]));
  if (ret != 0)
    return ret < 0 ? SP_EXIT_OK : ret;
  if (config_path == NULL)
    return sp_options_usage_error ("skill", USAGE, "--config is required");

  if (sp_verb_load_enabled_config ("skill", config_path, &config) < 0)
    return SP_EXIT_FAIL;

  f = open_memstream (&text, &len);
  if (f == NULL)
    return fail ("open_memstream: %s", strerror (errno));
  render (f, config);
  ret = ferror (f);
  if (fclose (f) != 0 || ret)
    return fail ("cannot render SKILL.md");

  if (out == NULL)
    ret = sp_write_all (STDOUT_FILENO, text, len, &err);
  else
    ret = write_out (out, text, len, &err);
  if (ret < 0)
    return fail ("%s: %s", out ? "--out" : "standard output", sp_error_message (err));
  return SP_EXIT_OK;
}
