/* sealed-probe-proxy skill --config PATH|- [--out FILE]: writes the
   agent-facing SKILL.md for the configured repositories.  It is guidance for
   the agent, never a security boundary: the proxy enforces every rule the
   file states.  See docs/skill.md.  */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
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

/* The first repository that may run (not sealed), or n_private_repos.  */
static size_t
first_runnable (const struct sp_config *c)
{
  size_t i = 0;

  while (i < c->n_private_repos && c->sensitivity[i] == SP_SENSITIVITY_SEALED)
    i++;
  return i;
}

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

/* The examples of answer schemas, each with its N and its content bits,
   ceil(log2(N + 1)).  tests/skill/test_skill.py parses every schema of the
   generated file with the proxy's own parser (check_skill_schemas) and holds
   each N and bit count to what it computes.  */
static const struct
{
  const char *what;
  const char *schema;
  const char *n;
  unsigned bits;
} schema_examples[] = {
  { "yes or no", "{\"type\":\"boolean\"}", "2", 2 },
  { "three outcomes, as three --outcome flags give them",
    "{\"type\":\"enum\",\"values\":[\"YES\",\"NO\",\"UNKNOWN\"]}", "3", 2 },
  { "which of 12 modules",
    "{\"type\":\"enum\",\"values\":[\"api\",\"auth\",\"billing\",\"cli\",\"core\",\"db\",\"jobs\","
    "\"mail\",\"search\",\"storage\",\"ui\",\"web\"]}",
    "12", 4 },
  { "a count from 0 to 1000", "{\"type\":\"integer\",\"minimum\":0,\"maximum\":1000}", "1,001", 10 },
  { "whether it is found, and how many (0 to 9)",
    "{\"type\":\"object\",\"fields\":{\"found\":{\"type\":\"boolean\"},\"count\":{\"type\":\"integer\","
    "\"minimum\":0,\"maximum\":9}}}",
    "20", 5 },
  { "none, or a line number from 1 to 100",
    "{\"type\":\"union\",\"variants\":{\"none\":{\"type\":\"const\",\"value\":null},\"line\":{\"type\":"
    "\"integer\",\"minimum\":1,\"maximum\":100}}}",
    "101", 7 },
  { "three yes-or-no checks at once", "{\"type\":\"array\",\"length\":3,\"items\":{\"type\":\"boolean\"}}",
    "8", 4 },
};

/* Answer schemas (docs/answer-schemas.md): when to use one, the algebra in
   brief, what each costs, the script's side and the call.  */
static void
render_schemas (FILE *f, const struct sp_config *c)
{
  fputs ("## Richer answers: an answer schema\n\n"
         "When the answer is a number, one of many names, or a few facts at once, do not spend many "
         "three-way calls on it: give an **answer schema** instead of the three outcomes. It is a small "
         "JSON description of every answer the script may give. The proxy counts those answers (N) "
         "before the call, checks the script's answer against the schema strictly, and gives you back "
         "its own canonical form of it, or `ERROR`.\n\n"
         "```sh\n"
         "sealed-probe --repo OWNER/NAME --answer-schema schema.json < probe.py\n"
         "sealed-probe --repo OWNER/NAME --answer-schema-json '{\"type\":\"integer\",\"minimum\":0,"
         "\"maximum\":1000}' < probe.py\n"
         "```\n\n"
         "Give one of the two (a file, or the JSON itself) instead of `--outcome`, never both.\n\n",
         f);
  fprintf (
      f,
      "### The schema\n\n"
      "A schema is one JSON object whose `\"type\"` is one of these, with exactly the keys shown:\n\n"
      "| type | keys | answers | N |\n"
      "|---|---|---|---|\n"
      "| `boolean` | none | `true`, `false` | 2 |\n"
      "| `const` | `value`: a literal | that literal | 1 |\n"
      "| `enum` | `values`: literals of one JSON type, all different | one of them | how many |\n"
      "| `integer` | `minimum`, `maximum` | every integer between, both included | `maximum - minimum + 1` "
      "|\n"
      "| `object` | `fields`: names to schemas | an object with exactly those keys | the product |\n"
      "| `tuple` | `items`: a list of schemas | a list, one value of each | the product |\n"
      "| `array` | `items`: one schema; `length`: 0 to %d | a list of exactly `length` values | N of "
      "`items` to the power `length` |\n"
      "| `union` | `variants`: tags to schemas | `{\"tag\": T, \"value\": V}` | the sum |\n\n"
      "A literal is a string of at most %d bytes with no control character, an integer, `true`, "
      "`false` or `null`. Names and tags are letters, digits and `_`, starting with a letter. At most "
      "%d bytes of JSON, %d nested levels below the top, %d schemas in all, %d fields, items or "
      "variants each; integers within +-(2^53 - 1).\n\n",
      SP_ANSWER_SCHEMA_MAX_ARRAY_LENGTH, SP_ANSWER_SCHEMA_MAX_LITERAL_BYTES, SP_ANSWER_SCHEMA_MAX_BYTES,
      SP_ANSWER_SCHEMA_MAX_DEPTH, SP_ANSWER_SCHEMA_MAX_NODES, SP_ANSWER_SCHEMA_MAX_FIELDS);
  fputs ("### What it costs\n\n"
         "A call with a schema of N answers carries `ceil(log2(N + 1))` bits of content (the `+ 1` is "
         "`ERROR`), plus the timing bits of the operator's release mode, like any call. Three outcomes "
         "cost 2 bits of content. The bits are charged before the script runs, whatever it answers, "
         "against the same budgets. So ask for no more precision than you need: a count capped at 10 "
         "costs 4 bits, one up to 1000 costs 10.\n\n",
         f);
  for (size_t i = 0; i < sizeof (schema_examples) / sizeof (schema_examples[0]); i++)
    fprintf (f, "- %s: `%s`: N = %s, %u bits.\n", schema_examples[i].what, schema_examples[i].schema,
             schema_examples[i].n, schema_examples[i].bits);
  fprintf (f,
           "\n### The script's answer\n\n"
           "The script writes `{\"result\": <value>}` to `/probe/out`, the value one of the schema's "
           "answers, for example `json.dump({\"result\": {\"found\": True, \"count\": 3}}, out)`. It is "
           "checked strictly: an object needs exactly its declared keys, a union value is "
           "`{\"tag\": \"none\", \"value\": null}`, an integer is written plainly (no `3.0`, no `1e3`) and "
           "must lie in its range, a string must equal a literal exactly. At most %d bytes. Anything else "
           "gives `ERROR`; so does a schema the proxy refuses.\n\n"
           "### What comes back\n\n"
           "One line, `{\"result\":<value>}`, the value in the proxy's canonical form: no spaces, an "
           "object's keys in the schema's order, for example `{\"result\":{\"found\":true,\"count\":3}}` or "
           "`{\"result\":42}`; or `{\"result\":\"ERROR\"}`. A schema with the literal string `ERROR` "
           "anywhere is refused, since an answer `\"ERROR\"` would read exactly as a failure. Every call "
           "spends one of "
           "the %u calls, as above.\n\n",
           SP_ANSWER_OUTPUT_MAX_BYTES, (unsigned)c->max_invocations);
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
    {
      uint64_t bits;

      /* A sealed repository never runs: naming it would only waste calls.  */
      if (c->sensitivity[i] == SP_SENSITIVITY_SEALED)
        continue;
      if (sp_config_repo_class_bits (c, i, &bits))
        fprintf (f, "- `%s` (`%s`: its calls may carry %" PRIu64 " bits in all, then each gives `ERROR`)\n",
                 c->private_repos[i], sp_sensitivity_name (c->sensitivity[i]), bits);
      else
        fprintf (f, "- `%s`\n", c->private_repos[i]);
    }
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
           c->private_repos[first_runnable (c)]);

  render_schemas (f, c);

  fprintf (f,
           "## What comes back, and what it costs\n\n"
           "- Exactly one of four symbols: one of your three outcomes, or `ERROR`. That is at most "
           "2 bits per call; with an answer schema, one of its N values or `ERROR` (above).\n"
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
  if (first_runnable (config) == config->n_private_repos)
    return fail ("every repository is `sealed`: there is nothing to probe, and serve refuses such a config "
                 "too");

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
